"""How often the run reads each token of a shard folder: epochs, the share read more than once, the share never
read.

"Tokens drawn / tokens available" hides repetition. Two source names for one folder each counted their own
draws (4.5 + 1.5 epochs of what is 6.0 epochs of one folder), and two sources read one folder in two orders.
So the reads of every component serving a folder (by its real path, links resolved) are laid over that
folder's tokens and counted together. A source used at several windows is read pass by pass
(:mod:`tokenmill.loader.passes`): its reads are those of each segment's view of the pass, and of the new
passes a segment starts, so nothing is read twice until a pass is spent.

Algorithm. A component that gives ``D`` of its ``n`` samples over the run reads each ``D // n`` times, and
once more the ``D % n`` first of its order (:func:`~tokenmill.loader.order.permute`, as the loader serves
them). A sample's pieces (entries of the packing plan; ``concat`` windows cut at document ends) become token
ranges of the folder's stream, through the cap and upsampling document map; a sweep over the ranges' ends
counts the tokens read 0, 1 or more times. ``distinct`` is the folder's tokens some source keeps (the
largest cap). Cost: per component, one int64 per sample and a few per piece (a piece per document, plus one
per window in ``concat``), and one sort of the pieces' ends per folder: a 5 G-token source of 5 M documents at
a 2,048 window (7.5 M pieces) takes about 4 s for its ranges and 2 s for the sweep, on one core.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from tokenmill.loader.order import epoch_seed, permute


@dataclass(frozen=True)
class Coverage:
    """Reads of one folder's distinct tokens over a run."""

    distinct: int  # tokens of the documents some source of the folder keeps (after its cap)
    read: int  # tokens read, every repeat counted
    repeated: int  # distinct tokens read more than once
    unread: int  # distinct tokens never read
    sources: tuple[str, ...]  # the source names that read this folder

    @property
    def epochs(self) -> float:
        return self.read / self.distinct if self.distinct else 0.0

    def share(self, n: int) -> float:
        return n / self.distinct if self.distinct else 0.0


def folder(path) -> str:
    """The key of a source's data: its directory's real path (two spellings of one folder are one folder)."""
    return os.path.realpath(path)


def coverage(data) -> dict[str, Coverage]:
    """Per source name of a :class:`~tokenmill.loader.recipe_data.RecipeDataset` that some phase draws: the
    coverage of its folder (the same object for every source naming that folder)."""
    totals = data.blend.counts(len(data))
    by_folder: dict[str, list[int]] = {}
    for c, key in enumerate(data.names):
        by_folder.setdefault(folder(data.recipe.source(data.source_of_component[key]).path), []).append(c)
    out = {}
    for comps in by_folder.values():
        cover = _folder_coverage(data, comps, totals)
        out.update({name: cover for name in cover.sources})
    return out


def _folder_coverage(data, comps: list[int], totals: dict[str, int]) -> Coverage:
    ranges, continued = [], []
    for c in comps:
        passes = data.passes.get(c)
        if passes is None:
            ranges.append(_ranges(data.datasets[c], totals[data.names[c]]))
        elif all(passes is not p for p in continued):  # a source read pass by pass: all its windows at once
            continued.append(passes)
            ranges.append(_in_folder(data.datasets[c].corpus, *passes.reads()))
    starts, ends, times = (np.concatenate(parts) for parts in zip(*ranges))
    base = _base(data.datasets[comps[0]].corpus)
    offsets = np.r_[0, np.cumsum(base.lengths.astype(np.int64))]
    distinct = int(offsets[max(_kept(data.datasets[c].corpus) for c in comps)])
    once, more = _swept(starts, ends, times)
    names = tuple(dict.fromkeys(data.source_of_component[data.names[c]] for c in comps))
    return Coverage(distinct, int(((ends - starts) * times).sum()), more, distinct - once, names)


def _swept(starts: np.ndarray, ends: np.ndarray, times: np.ndarray) -> tuple[int, int]:
    """(tokens read at least once, tokens read at least twice) of the ranges ``[starts, ends)`` read ``times``."""
    if not starts.size:
        return 0, 0
    at = np.concatenate([starts, ends])
    step = np.concatenate([times, -times])
    order = np.argsort(at)  # ties need no order: the ranges between equal ends are empty
    at, level = at[order], np.cumsum(step[order])
    width = np.diff(at)
    return int(width[level[:-1] >= 1].sum()), int(width[level[:-1] >= 2].sum())


def _ranges(d, drawn: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, times read) of the token ranges of the folder's stream that component ``d`` reads when it
    gives ``drawn`` samples."""
    docs, at, lens, entry = _pieces(d)
    return _in_folder(d.corpus, docs, at, lens, _times(d, drawn)[entry])


def _in_folder(corpus, docs, at, lens, times) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, times) in the folder's stream of the pieces read ``times`` (documents of ``corpus``)."""
    if hasattr(corpus, "doc_map"):  # a cap or upsampling: virtual documents are base documents
        docs = corpus.doc_map[docs]
    offsets = np.r_[0, np.cumsum(_base(corpus).lengths.astype(np.int64))]
    starts = offsets[docs] + at
    read = times > 0
    return starts[read], (starts + lens)[read], times[read]


def _times(d, drawn: int) -> np.ndarray:
    """How often each plan entry of ``d`` is read when it gives ``drawn`` samples (sample ``j`` is entry
    ``permute(j % n)``)."""
    n = len(d)
    times = np.full(n, drawn // n, dtype=np.int64)
    rest = np.arange(drawn % n, dtype=np.int64)
    times[permute(rest, n, seed=epoch_seed(d.seed, d.epoch)) if d.shuffle else rest] += 1
    return times


def _pieces(d) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(virtual document, start inside it, length, plan entry) of every piece of every sample of ``d``."""
    if d.mode != "concat":
        plan = d.plan
        at = np.zeros(plan.order.size, np.int64) if plan.starts is None else plan.starts.astype(np.int64)
        entry = np.repeat(np.arange(plan.n_packs, dtype=np.int64), np.diff(plan.pack_offsets))
        return plan.order.astype(np.int64), at, plan.seq_lens.astype(np.int64), entry
    offsets = np.r_[0, np.cumsum(d.corpus.lengths.astype(np.int64))]
    end = len(d) * d.seq_len  # the stream's tail that fills no window is never read
    cuts = np.sort(np.concatenate([offsets[offsets < end], np.arange(0, end + 1, d.seq_len, dtype=np.int64)]))
    cuts = cuts[np.r_[True, cuts[1:] != cuts[:-1]]]  # (np.union1d: the same, 100x slower on 10 M cuts)
    lo, hi = cuts[:-1], cuts[1:]
    docs = np.searchsorted(offsets, lo, side="right") - 1
    return docs, lo - offsets[docs], hi - lo, lo // d.seq_len


def _base(corpus):
    return getattr(corpus, "base", corpus)


def _kept(corpus) -> int:
    """Documents of the folder the source keeps (a cap keeps a prefix of them)."""
    return int(getattr(corpus, "n_unique", len(corpus.lengths)))
