"""A source used at several windows, read pass by pass: each window continues where the one before stopped.

Rule. A pass is the source's tokens once (after its cap and upsampling). The source's draws over a run form
segments: maximal runs of the phases drawing it at one window (``web@2048`` in phases 1-2, ``web@32768`` in
phase 3, ``web@2048`` again in phase 4), each drawing the samples the schedule gives it (``blend.counts``).
The first segment packs the whole pass at its window, exactly as a source used at one window is packed. A
later segment packs what the pass has not read yet: ``concat``, the unread intervals of the stream in stream
order, cut into its window; ``bfd``, the examples not yet drawn, packed best-fit-decreasing; ``boundary``,
the unread pieces of documents, packed in order. Its samples come in the order of a seeded bijection
(:func:`~tokenmill.loader.order.permute`, keyed by seed, epoch and segment). Only when that remainder is
spent does the segment start new passes at its own window (the whole source packed as a one-window source is,
in one order each pass), and the next segment continues from what the last of them left.

What a pass leaves unread when it is spent: the tail that fills no window of the segment that spends it
(``concat``: fewer tokens than that window), or the examples longer than that window (``bfd``: an example is
never cut). Nothing is read twice within a pass.

Cost: at start-up, per segment after the first, one bijection over the samples the earlier segment drew and
one pair of int64 per unread run of the stream (``bfd``: a best-fit-decreasing plan of the examples left).
Per sample: two binary searches. Nothing is stored per token.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from tokenmill.loader.dataset import PackedDataset
from tokenmill.loader.order import epoch_seed, permute
from tokenmill.pack import PackPlan, best_fit_decreasing, boundary_aware


class View:
    """The stream intervals ``[lo, hi)`` (stream order; in ``bfd`` and ``boundary`` each inside one document)
    packed at ``window`` and served in the order of a bijection seeded with ``seed``."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, *, window: int, mode: str, seed: int,
                 offsets: np.ndarray, plan: PackPlan | None = None):
        self.lo, self.hi, self.window, self.mode, self.seed, self.offsets = lo, hi, int(window), mode, int(seed), offsets
        self.cum = np.r_[0, np.cumsum(hi - lo)] if mode == "concat" else None
        if plan is None and mode != "concat":
            plan = best_fit_decreasing(hi - lo, window, seed=seed) if mode == "bfd" else boundary_aware(hi - lo, window)
        self.plan, self._lengths = plan, None
        self.n = int(self.cum[-1]) // self.window if self.cum is not None else self._packs.n_packs

    @property
    def _packs(self) -> PackPlan:
        if self.plan is None:
            raise TypeError("a concat view has no packing plan")
        return self.plan

    def __len__(self) -> int:
        return self.n

    def entries(self, positions) -> np.ndarray:
        return permute(positions, self.n, seed=self.seed)

    def pieces(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(documents, start inside each, lengths) of sample ``i``."""
        e = int(self.entries([i])[0])
        if self.cum is not None:
            docs, at, lens, _ = self._windows(np.array([e], np.int64), self.cum)
            return docs, at, lens
        items, starts, lens = self._packs.pack(e)
        return self._in_docs(items, starts, lens)

    def all_pieces(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(document, start inside it, length, sample entry) of every piece of every sample."""
        if self.cum is not None:
            return self._windows(np.arange(self.n, dtype=np.int64), self.cum)
        plan = self._packs
        starts = np.zeros(plan.order.size, np.int64) if plan.starts is None else plan.starts
        entry = np.repeat(np.arange(plan.n_packs, dtype=np.int64), np.diff(plan.pack_offsets))
        return (*self._in_docs(plan.order, starts, plan.seq_lens), entry)

    def pack_lengths(self) -> np.ndarray:
        """Real tokens of every entry (``bfd`` and ``boundary``; computed once)."""
        if self._lengths is None:
            self._lengths = self._packs.pack_lengths().astype(np.int64)
        return self._lengths

    def left(self, drawn: int) -> tuple[np.ndarray, np.ndarray]:
        """The stream intervals this view's first ``drawn`` samples do not read, in stream order."""
        taken = np.zeros(self.n, np.bool_)
        taken[self.entries(np.arange(drawn, dtype=np.int64))] = True
        if self.cum is not None:  # runs of unread windows and the tail no window fills, back in the stream
            a, b = _runs(np.flatnonzero(~taken))
            a, b = np.r_[a * self.window, self.n * self.window], np.r_[b * self.window, self.cum[-1]]
            k, vlo, vhi, _ = _split(a, b, self.cum)
            return _merged(self.lo[k] + vlo - self.cum[k], self.lo[k] + vhi - self.cum[k], None)
        plan = self._packs
        keep = ~taken[np.repeat(np.arange(plan.n_packs), np.diff(plan.pack_offsets))]
        if plan.starts is None:  # whole items (bfd): those of no drawn pack (or none: longer than the window)
            unread = np.ones(self.lo.size, np.bool_)
            unread[plan.order[~keep]] = False
            return _merged(self.lo[unread], self.hi[unread], self.offsets)
        lo = (self.lo[plan.order[keep]] + plan.starts[keep]).astype(np.int64)  # boundary: every piece is packed
        hi = lo + plan.seq_lens[keep]
        order = np.argsort(lo, kind="stable")
        return _merged(lo[order], hi[order], self.offsets)

    def _windows(self, entries: np.ndarray, cum: np.ndarray):
        """Pieces of the windows ``entries``: cut at the intervals (``cum``: their starts in the view), then at
        the documents."""
        a = entries * self.window
        k, vlo, vhi, which = _split(a, a + self.window, cum)
        real = self.lo[k] - cum[k]
        docs, lo, hi, inner = _split(real + vlo, real + vhi, self.offsets)
        return docs, lo - self.offsets[docs], hi - lo, entries[which[inner]]

    def _in_docs(self, items, starts, lens):
        real = self.lo[items] + starts
        docs = np.searchsorted(self.offsets, real, "right") - 1
        return docs, real - self.offsets[docs], np.asarray(lens, np.int64)


def _split(a: np.ndarray, b: np.ndarray, cuts: np.ndarray):
    """The ranges ``[a, b)`` cut at the sorted points ``cuts`` (``cuts[0] <= a``, ``b <= cuts[-1]``): for each
    non-empty piece ``(k, lo, hi, which)``, a part of range ``which`` inside ``[cuts[k], cuts[k + 1])``."""
    k0 = np.searchsorted(cuts, a, "right") - 1
    n = np.maximum(np.searchsorted(cuts, b, "left") - k0, 0)
    which = np.repeat(np.arange(a.size, dtype=np.int64), n)
    k = np.repeat(k0, n) + np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    lo, hi = np.maximum(a[which], cuts[k]), np.minimum(b[which], cuts[k + 1])
    keep = hi > lo
    return k[keep], lo[keep], hi[keep], which[keep]


def _runs(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[a, b)`` of each run of consecutive integers in the sorted ``idx``."""
    if not idx.size:
        return idx, idx
    first = np.r_[True, idx[1:] != idx[:-1] + 1]
    return idx[first], idx[np.r_[first[1:], True]] + 1


def _merged(lo: np.ndarray, hi: np.ndarray, offsets: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted intervals without the empty ones, touching ones joined (inside one document when ``offsets`` is
    given: ``bfd`` and ``boundary`` never pack across documents)."""
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    if not lo.size:
        return lo, hi
    join = hi[:-1] == lo[1:]
    if offsets is not None and join.any():
        doc = np.searchsorted(offsets, lo, "right")
        join &= doc[:-1] == doc[1:]
    first = np.r_[True, ~join]
    return lo[first], hi[np.r_[first[1:], True]]


def full_view(d) -> View:
    """The whole pass of the packed dataset ``d``, in ``d``'s own plan and order."""
    offsets = np.r_[0, np.cumsum(d.corpus.lengths.astype(np.int64))]
    lo, hi = (offsets[:1], offsets[-1:]) if d.mode == "concat" else (offsets[:-1], offsets[1:])
    return View(lo, hi, window=d.seq_len, mode=d.mode, seed=epoch_seed(d.seed, d.epoch), offsets=offsets,
                plan=d.plan)


def segment_seed(seed: int, epoch: int, segment: int) -> int:
    """The bijection seed of a segment's view of a pass's remainder (63 bits, as :func:`epoch_seed`)."""
    state = np.random.SeedSequence([int(seed), int(epoch), int(segment)]).generate_state(1, np.uint64)[0]
    return int(state >> np.uint64(1))


@dataclass(frozen=True)
class Segment:
    component: int
    first: int  # the component's index of the segment's first sample
    count: int
    view: View  # what the pass had left when the segment began (the whole pass at its window for the first)
    dataset: PackedDataset  # the source at the segment's window: its new passes
    full: View  # the same, as a view

    def pieces(self, i: int):
        m = len(self.view)
        return self.view.pieces(i) if i < m else self.dataset.pieces((i - m) % len(self.dataset))

    def tokens(self, a: int, b: int) -> int:
        """Real tokens of the segment's samples ``[a, b)``."""
        m = len(self.view)
        return _tokens(self.view, a, min(b, m)) + _tokens(self.full, max(a, m) - m, b - m)


def _tokens(view: View, a: int, b: int) -> int:
    if b <= a:
        return 0
    if view.cum is not None:
        return (b - a) * view.window
    per_entry, total = view.pack_lengths(), 0
    for x in range(a, b, 1 << 20):  # chunks bound memory for long runs
        idx = np.arange(x, min(b, x + (1 << 20)), dtype=np.int64) % view.n
        total += int(per_entry[view.entries(idx)].sum())
    return total


class Passes:
    """The segments of one source used at several windows (the module doc): ``segments`` is ``[(component,
    samples)]`` in run order, ``datasets`` the packed datasets by component."""

    def __init__(self, segments: list[tuple[int, int]], datasets: dict[int, PackedDataset]):
        fulls = {c: full_view(d) for c, d in datasets.items()}
        self.segments: list[Segment] = []
        rest, given = None, dict.fromkeys(datasets, 0)
        for s, (c, n) in enumerate(segments):
            d, full = datasets[c], fulls[c]
            view = full if rest is None else View(*rest, window=d.seq_len, mode=d.mode, offsets=full.offsets,
                                                  seed=segment_seed(d.seed, d.epoch, s))
            self.segments.append(Segment(c, given[c], n, view, d, full))
            given[c] += n
            if s == len(segments) - 1:
                break
            if n > len(view):  # the pass is spent: new passes at this window, the last one read in part
                view, n = full, (n - len(view)) % len(full) or len(full)
            rest = view.left(n)
            rest = rest if rest[0].size else None  # nothing left: the next segment starts a pass
        self._of: dict[int, list[Segment]] = {}
        for seg in self.segments:
            self._of.setdefault(seg.component, []).append(seg)

    def _segment(self, c: int, j: int) -> Segment:
        segs = self._of[c]
        return segs[bisect.bisect_right([s.first for s in segs], j) - 1]

    def pieces(self, c: int, j: int):
        """(documents, start inside each, lengths) of component ``c``'s sample ``j`` (its index over the run)."""
        seg = self._segment(c, j)
        return seg.pieces(j - seg.first)

    def tokens(self, c: int, lo: int, hi: int) -> int:
        """Real tokens of component ``c``'s samples ``[lo, hi)``."""
        return sum(seg.tokens(max(lo, seg.first) - seg.first, min(hi, seg.first + seg.count) - seg.first)
                   for seg in self._of[c] if lo < seg.first + seg.count and seg.first < hi)

    def first_repeat(self) -> tuple[int, int] | None:
        """(component, its index) of the first sample read in a second pass of the source; None: one pass."""
        seg = next((s for s in self.segments if s.count > len(s.view)), None)
        return None if seg is None else (seg.component, seg.first + len(seg.view))

    def reads(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(document, start inside it, length, times read) of every piece the run reads of the source."""
        parts = []
        for seg in self.segments:
            m = len(seg.view)
            parts.append(_read(seg.view, min(seg.count, m)))
            if seg.count > m:
                parts.append(_read(seg.full, seg.count - m))
        docs, at, lens, times = (np.concatenate(p) for p in zip(*parts))
        return docs, at, lens, times


def _read(view: View, drawn: int):
    """Pieces of ``view`` read when it gives ``drawn`` samples (in its order, wrapping), with how often."""
    times = np.full(view.n, drawn // max(view.n, 1), np.int64)
    times[view.entries(np.arange(drawn % max(view.n, 1), dtype=np.int64))] += 1
    docs, at, lens, entry = view.all_pieces()
    read = times[entry] > 0
    return docs[read], at[read], lens[read], times[entry][read]


def continued(blend, source_of: dict[str, str]) -> dict[int, Passes]:
    """The :class:`Passes` of every source a :class:`~tokenmill.loader.schedule.ScheduledBlend` serves at more
    than one window (``source_of``: component name -> source), by component."""
    by_source: dict[str, list[int]] = {}
    for c, key in enumerate(blend.names):
        by_source.setdefault(source_of[key], []).append(c)
    total = list(blend.counts(len(blend)).values())
    out = {}
    for comps in (cs for cs in by_source.values() if len(cs) > 1):
        runs: list[tuple[int, int]] = []
        for before, after in zip(blend.offsets, blend.offsets[1:] + [total]):
            for c in (c for c in comps if after[c] > before[c]):
                if runs and runs[-1][0] == c:  # the same window in the next phase: one segment goes on
                    runs[-1] = (c, runs[-1][1] + after[c] - before[c])
                else:
                    runs.append((c, after[c] - before[c]))
        passes = Passes(runs, {c: blend.datasets[c] for c in comps})
        out.update(dict.fromkeys(comps, passes))
    return out
