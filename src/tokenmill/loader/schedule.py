"""``ScheduledBlend``: a blend whose weights change over training, in phases (MiniCPM-style decay mixing).

A schedule is a list of phases, each ``{"until_step": S, "weights": {name: w, ...}}`` (the last phase may
omit ``until_step``: it runs to ``num_samples``; ``until_sample`` instead of ``until_step`` ends a phase at a
sample, for phases of different batch sizes). Steps are global optimizer steps; with
``global_batch_size`` G (``batch_size x world_size x gradient-accumulation``) phase boundaries fall at
samples ``S x G``, so a resume with another world size but the same global batch keeps them in place.

Rule. Blended sample ``k`` lies in the phase whose sample range holds it; inside the phase, sample
``k - start`` is routed among the phase's components by the same counter rule as
:class:`~tokenmill.loader.blend.BlendedDataset` (a Bresenham split per level of a binary tree; a zero
weight takes nothing). A component's index continues across phases: it is the number of samples the
component gave in the earlier phases (closed form from the same rule) plus its count inside this phase,
so no component restarts at a phase boundary and nothing is stored per sample. A component read past its
end wraps around (another epoch of that source: Phi-4-style repeats of a small source). The components
active in one phase share one ``seq_len``; another phase may use another (a long-context phase).

Cost: O(log components) integer steps per sample plus a binary search over the phases; the per-phase
offsets are computed once (O(phases x components)).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tokenmill.errors import ConfigError
from tokenmill.loader.blend import BlendedDataset, _as_dataset, counts, route
from tokenmill.loader.corpus import check_same_tokenizer

_SCALE = 1 << 32


def parse_phases(phases: Sequence[Mapping[str, Any]], names: list[str], *,
                 global_batch_size: int) -> tuple[list[int], list[list[int]]]:
    """``(phase start samples, integer weights per phase)``; every problem of the schedule reported at once."""
    problems, starts, weights, prev = [], [0], [], 0
    if not phases:
        problems.append("schedule: give at least one phase")
    for i, ph in enumerate(phases):
        w = ph.get("weights") if isinstance(ph, Mapping) else None
        if not isinstance(w, Mapping) or not w:
            problems.append(f"phase {i}: weights must map component names to numbers")
            continue
        unknown = sorted(set(w) - set(names))
        if unknown:
            problems.append(f"phase {i}: unknown component(s) {unknown}; known: {names}")
        bad = [n for n, v in w.items() if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0]
        total = sum(float(v) for n, v in w.items() if n not in bad and n in names)
        if bad or total <= 0:
            problems.append(f"phase {i}: weights must be numbers >= 0 with a positive sum (got {dict(w)})")
            continue
        weights.append([round(float(w.get(n, 0)) / total * _SCALE) for n in names])
        until, last = _end_sample(ph, global_batch_size), i == len(phases) - 1
        if until is None:
            if not last:
                problems.append(f"phase {i}: only the last phase may omit until_step")
            continue
        if not isinstance(until, int) or isinstance(until, bool) or until <= prev:
            problems.append(f"phase {i}: until_step must be a whole number after the previous phase's "
                            f"({ph.get('until_step', ph.get('until_sample'))!r})")
            continue
        prev = until
        if not last:
            starts.append(prev)
    if problems:
        raise ConfigError(problems)
    return starts, weights


def _end_sample(phase: Mapping[str, Any], global_batch_size: int):
    """The sample a phase ends before: ``until_sample`` (phases of different batch sizes), else ``until_step x
    global_batch_size``; None when neither is given, the value as given when it is not a whole number."""
    if "until_sample" in phase:
        return phase["until_sample"]
    until = phase.get("until_step")
    return until * global_batch_size if isinstance(until, int) and not isinstance(until, bool) else until


class ScheduledBlend:
    """Map-style dataset over ``{name: source}`` whose mixture follows ``phases`` (see the module doc)."""

    def __init__(self, components: Mapping[str, Any], phases: Sequence[Mapping[str, Any]], *, num_samples: int,
                 global_batch_size: int, seq_len: int | None = None, seed: int = 0, epoch: int = 0, tokenizer=None):
        if not components:
            raise ConfigError("ScheduledBlend needs at least one component")
        if global_batch_size < 1 or num_samples < 1:
            raise ConfigError(f"need global_batch_size >= 1 and num_samples >= 1; got {global_batch_size}, {num_samples}")
        self.names = list(components)
        self.datasets = [_as_dataset(src, seq_len, seed, tokenizer) for src in components.values()]
        check_same_tokenizer([(d.tokenizer_fingerprint, f"component {n!r}") for n, d in zip(self.names, self.datasets)])
        self.phases = [dict(p) for p in phases]
        self.global_batch_size = int(global_batch_size)
        self.starts, self.weights = parse_phases(self.phases, self.names, global_batch_size=self.global_batch_size)
        self.phase_seq_lens = self._phase_seq_lens()
        last_until = _end_sample(self.phases[-1], self.global_batch_size)
        self._len = min(num_samples, last_until) if last_until else int(num_samples)
        self.offsets = self._offsets()
        self.seq_len, self.seed = self.phase_seq_lens[0], int(seed)
        self.set_epoch(epoch)

    def _phase_seq_lens(self) -> list[int]:
        """The sample length of each phase: its components may differ from other phases' (a long-context
        phase), never from each other's."""
        out = []
        for i, w in enumerate(self.weights):
            lengths = {self.datasets[c].seq_len for c, x in enumerate(w) if x > 0}
            if len(lengths) > 1:
                raise ConfigError(f"phase {i}: its components have different seq_len {sorted(lengths)}; "
                                  "one phase serves samples of one length")
            out.append(lengths.pop())
        return out

    def _offsets(self) -> list[list[int]]:
        """Samples each component gave before each phase."""
        out, acc = [], [0] * len(self.names)
        bounds = self.starts[1:] + [self._len]
        for start, end, w in zip(self.starts, bounds, self.weights):
            out.append(list(acc))
            acc = [a + c for a, c in zip(acc, counts(max(0, min(end, self._len) - start), w))]
        return out

    @property
    def fingerprint(self) -> str:
        doc = {"phases": self.phases, "global_batch_size": self.global_batch_size, "n": self._len,
               "components": {n: d.fingerprint for n, d in zip(self.names, self.datasets)}}
        return "schedule(" + json.dumps(doc, sort_keys=True) + ")"

    tokenizer_fingerprint = property(lambda self: self.datasets[0].tokenizer_fingerprint)
    tokenizer = property(lambda self: self.datasets[0].tokenizer)
    vocab_size = property(lambda self: self.datasets[0].vocab_size)
    pad_id = property(lambda self: self.datasets[0].pad_id)
    eos_id = property(lambda self: self.datasets[0].eos_id)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        for d in self.datasets:
            d.set_epoch(self.epoch)

    def __len__(self) -> int:
        return self._len

    def phase_of(self, k: int) -> int:
        return bisect.bisect_right(self.starts, k) - 1

    def route(self, k: int) -> tuple[int, int]:
        """(component, index inside it, before wrapping) of blended sample ``k``."""
        p = self.phase_of(k)
        c, j = route(k - self.starts[p], self.weights[p])
        return c, self.offsets[p][c] + j

    def counts(self, n: int) -> dict[str, int]:
        """Samples each component gives to the first ``n`` blended samples."""
        p = self.phase_of(max(0, n - 1)) if n else 0
        inside = counts(n - self.starts[p], self.weights[p]) if n else [0] * len(self.names)
        return {name: self.offsets[p][i] + inside[i] for i, name in enumerate(self.names)}

    def __getitem__(self, k) -> dict:
        if not 0 <= k < self._len:
            raise IndexError(f"sample index {k!r} out of range for {self._len} samples")
        c, j = self.route(int(k))
        d = self.datasets[c]
        return d[j % len(d)]


def mixture(components: Mapping[str, Any], *, cap: int | None = None, caps: Mapping[str, int] | None = None,
            epochs: Mapping[str, float] | None = None, seq_len: int | None = None, seed: int = 0, tokenizer=None):
    """A :class:`~tokenmill.loader.blend.BlendedDataset` mixing sources in proportion to their size, each
    capped (FLAN's examples-per-task cap: ``cap`` for all, ``caps`` per source) and repeated ``epochs``
    times (Phi-4-style extra epochs for some sources; fractions allowed).

    Source ``i`` contributes ``min(len_i, cap_i) x epochs_i`` samples (rounded, at least one) to a blend of
    exactly their sum; its weight is that share. A capped source gives a different prefix of its shuffled
    order every epoch (its dataset re-plans per epoch), so a cap limits how much of a large task one pass
    sees, not which part.
    """
    problems = []
    names = list(components)
    for label, given in (("caps", caps or {}), ("epochs", epochs or {})):
        unknown = sorted(set(given) - set(names))
        if unknown:
            problems.append(f"{label}: unknown source(s) {unknown}; known: {names}")
        bad = [k for k, v in given.items() if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0]
        if bad:
            problems.append(f"{label}: values must be positive numbers ({bad})")
    if cap is not None and (not isinstance(cap, int) or cap < 1):
        problems.append(f"cap: expected a whole number >= 1, got {cap!r}")
    if problems:
        raise ConfigError(problems)
    datasets = {n: _as_dataset(src, seq_len, seed, tokenizer) for n, src in components.items()}
    takes = {}
    for n, d in datasets.items():
        limit = (caps or {}).get(n, cap)
        size = min(len(d), limit) if limit else len(d)
        takes[n] = max(1, round(size * float((epochs or {}).get(n, 1))))
    return BlendedDataset([(datasets[n], takes[n]) for n in names], seq_len=seq_len, seed=seed,
                          num_samples=sum(takes.values()), tokenizer=tokenizer)
