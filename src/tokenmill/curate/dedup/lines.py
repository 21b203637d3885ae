"""Line (or paragraph) dedup, CCNet/C4 style: text repeated across the corpus is cut out of documents.

A *segment* is a line (``unit="line"``) or a paragraph (``unit="paragraph"``: text between blank lines).
Each segment is normalised (``normalize``: NFKC, lowercase, punctuation and digits removed, whitespace
collapsed by default, as CCNet does) and hashed to 64 bits; blank segments are never counted or removed.
A segment found in more than ``threshold`` documents (a document counts once) is *repeated*: it is
removed from every document that holds it, except the first such document (by (unit, row) order) when
``keep="first"`` (CCNet; ``keep="none"`` removes every copy). A document left with nothing but blank
text is removed as ``line_dedup_v1:empty``. This is a modifier: the text is rewritten (kept segments
joined with ``\\n``, or ``\\n\\n`` for paragraphs) and the ledger gets ``line_dedup.segments_removed`` and
``line_dedup.chars_removed``.

Stages (``U`` upstream units, ``B = partition_rows``):

1. ``line_dedup.count`` (map, ``U`` units): the distinct ``(segment hash, doc)`` pairs of each unit, split
   into ``P = ceil(segments / B)`` hash ranges. Cost: Arrow split and normalisation kernels and one numpy
   multiply-add per byte (:func:`~tokenmill.curate.dedup.common.hash_strings`).
2. ``line_dedup.groups`` (``P`` units): one hash range (about ``B`` pairs, 16 bytes each) sorted by
   ``(hash, doc)``: the repeated hashes with their first document, sorted by hash. Never one table of the
   whole corpus: each range is counted alone.
3. ``line_dedup`` (documents stage, ``U`` units): the unit's segments are hashed again and looked up by
   binary search in the repeated-hash file of their range (one range loaded at a time); the text is
   rewritten. Documents with nothing removed keep their exact bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.base import segments as seg
from tokenmill.curate.dedup import common as cm
from tokenmill.engine.outputs import Documents, Partitioned, as_data
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.report.accounting import Stats
from tokenmill.steps.contract import column, reason

SEPARATORS = {"line": ("\n", "\n"), "paragraph": (r"\n[ \t\r]*\n", "\n\n")}


@dataclass(frozen=True)
class LineDedup:
    """Cut lines or paragraphs found in more than ``threshold`` documents out of all but the first."""

    unit: str = "line"  # "line" or "paragraph"
    threshold: int = 1  # a segment in more than this many documents is repeated
    keep: str = "first"  # "first": the first document keeps its copy; "none": every copy is removed
    normalize: tuple[str, ...] = ("nfkc", "lower", "punctuation", "digits", "whitespace")
    partition_rows: int = 8_000_000
    name: str = "line_dedup"
    version: int = 1

    def __post_init__(self):
        object.__setattr__(self, "normalize", tuple(self.normalize))
        problems = []
        if self.unit not in SEPARATORS:
            problems.append(f"line_dedup: unit={self.unit!r} must be 'line' or 'paragraph'")
        if self.keep not in ("first", "none"):
            problems.append(f"line_dedup: keep={self.keep!r} must be 'first' or 'none'")
        if not isinstance(self.threshold, int) or self.threshold < 1:
            problems.append(f"line_dedup: threshold must be an integer >= 1, not {self.threshold!r}")
        if problems:
            raise ConfigError(problems)
        cm.check_normalize(self.normalize, "line_dedup")
        cm.n_partitions(0, self.partition_rows)

    def stages(self, upstream: str) -> list[Stage]:
        return [Stage(f"{self.name}.count", 1, lambda ctx: _plan_count(self, upstream, ctx)),
                Stage(f"{self.name}.groups", 1, lambda ctx: _plan_groups(self, upstream, ctx)),
                Stage(self.name, self.version, lambda ctx: _plan_apply(self, upstream, ctx))]


def _plan_count(step: LineDedup, upstream: str, ctx: StageContext) -> StagePlan:
    parts = cm.upstream_parts(ctx, upstream)
    # the number of segments is unknown before reading: size the ranges by bytes (~ 64 bytes a segment)
    size = sum(p.size for p in parts) * 4 // 64
    p = cm.n_partitions(size, step.partition_rows)
    return StagePlan(cm.units_of(parts), CountTask(step, str(ctx.out), p), cm.stage_params(step, partitions=p))


def _plan_groups(step: LineDedup, upstream: str, ctx: StageContext) -> StagePlan:
    dirs, p = cm.partitioned(ctx, f"{step.name}.count")
    task = GroupTask(step, str(ctx.out), dirs)
    return StagePlan([Unit(i, f"part-{i:05d}", payload=i) for i in range(p)], task, cm.stage_params(step),
                     drop=(f"_work/{step.name}/count",))


def _plan_apply(step: LineDedup, upstream: str, ctx: StageContext) -> StagePlan:
    results = ctx.results[f"{step.name}.groups"]
    task = ApplyTask(step, str(ctx.out), tuple(r.data["file"] for r in results))
    return StagePlan(cm.units_of(cm.upstream_parts(ctx, upstream)), task, cm.stage_params(step),
                     drop=(f"_work/{step.name}/groups",))


def segments(step: LineDedup, texts: pa.Array) -> tuple[pa.ListArray, np.ndarray, np.ndarray]:
    """Each document's segments (a list array), their hashes, and which ones are blank."""
    pattern, _ = SEPARATORS[step.unit]
    split = pc.split_pattern(texts, pattern) if step.unit == "line" else pc.split_pattern_regex(texts, pattern)
    flat = pc.list_flatten(split)
    norm = cm.normalize_array(flat, step.normalize)
    blank = pc.equal(pc.binary_length(pc.utf8_trim_whitespace(norm)), 0).to_numpy(zero_copy_only=False)
    return split, cm.hash_strings(norm), blank


@dataclass(frozen=True)
class CountTask:
    output: ClassVar[type] = Partitioned  # what its units hand on, checked at commit (engine/outputs.py)
    step: LineDedup
    out: str
    partitions: int

    @property
    def segments(self) -> tuple[str, ...]:  # its units' files go to segment files (base/segments.py)
        return (f"_work/{self.step.name}/count",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        part: cm.DocsPart = unit.payload
        table = cm.read_docs(Path(self.out), part)
        split, h, blank = segments(self.step, table.column("text").combine_chunks())
        doc = cm.global_ids(unit.index, table.num_rows)[pc.list_parent_indices(split).to_numpy()]
        h, doc = h[~blank], doc[~blank]
        order = np.lexsort((doc, h))
        h, doc = h[order], doc[order]
        new = np.concatenate([[True], (h[1:] != h[:-1]) | (doc[1:] != doc[:-1])]) if len(h) else np.zeros(0, bool)
        h, doc = h[new], doc[new]
        rel = f"_work/{self.step.name}/count/{unit.name}"
        cm.write_partitioned(staging / rel, cm.partition_of(h, self.partitions), self.partitions,
                             {"hash": h, "doc": doc}, order=(doc, h))
        return UnitResult(stats=Stats(input=table.num_rows, kept=table.num_rows),
                          data=as_data(Partitioned(rel, self.partitions), pairs=len(h)))


@dataclass(frozen=True)
class GroupTask:
    step: LineDedup
    out: str
    dirs: tuple[str, ...]

    @property
    def segments(self) -> tuple[str, ...]:
        return (f"_work/{self.step.name}/groups",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        g = cm.read_partition([Path(self.out) / d for d in self.dirs], unit.payload, ["hash", "doc"])
        h, doc = g["hash"].astype(np.uint64), g["doc"].astype(np.int64)
        order = np.lexsort((doc, h))
        h, doc = h[order], doc[order]
        start = np.flatnonzero(np.concatenate([[True], h[1:] != h[:-1]])) if len(h) else np.zeros(0, np.int64)
        count = np.diff(np.concatenate([start, [len(h)]]))
        rep = count > self.step.threshold
        rel = f"_work/{self.step.name}/groups/{unit.name}.npz"
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(staging / rel, "wb") as fh:
            np.savez(fh, hash=h[start[rep]], first=doc[start[rep]], count=count[rep])
        return UnitResult(data={"file": rel, "pairs_held": len(h), "repeated": int(rep.sum())})


@dataclass(frozen=True)
class ApplyTask:
    output: ClassVar[type] = Documents  # what its units hand on, checked at commit (engine/outputs.py)
    step: LineDedup
    out: str
    files: tuple[str, ...]

    @property
    def segments(self) -> tuple[str, ...]:  # its documents are an intermediate (base/segments.py)
        return (f"steps/{self.step.name}/docs",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        part: cm.DocsPart = unit.payload
        table = cm.read_docs(Path(self.out), part)
        split, h, blank = segments(self.step, table.column("text").combine_chunks())
        parent = pc.list_parent_indices(split).to_numpy()
        doc = cm.global_ids(unit.index, table.num_rows)[parent]
        drop = self._repeated(h, doc) & ~blank
        flat = pc.list_flatten(split)
        kept = pa.ListArray.from_arrays(_offsets(parent, ~drop, table.num_rows), flat.filter(pa.array(~drop)))
        removed = np.bincount(parent[drop], minlength=table.num_rows)
        original = table.column("text").combine_chunks()
        joined = pc.binary_join(kept, pa.scalar(SEPARATORS[self.step.unit][1], pa.large_string())).cast(original.type)
        text = pc.if_else(pa.array(removed > 0), joined, original)  # untouched documents keep their bytes
        chars = np.bincount(parent[drop], weights=pc.utf8_length(flat).to_numpy()[drop], minlength=table.num_rows)
        empty = pc.equal(pc.binary_length(pc.utf8_trim_whitespace(text)), 0).to_numpy(zero_copy_only=False)
        why = reason(self.step, "empty")
        decision = cm.Decision(
            columns={column(self.step, "segments_removed"): removed.astype(np.int64),
                     column(self.step, "chars_removed"): chars.astype(np.int64)},
            reasons=[why if e and r else None for e, r in zip(empty.tolist(), (removed > 0).tolist())], text=text)
        return cm.write_documents(staging, self.step.name, part, table, decision,
                                  extra_stats={"line_dedup_segments_removed": int(removed.sum())})

    def _repeated(self, h: np.ndarray, doc: np.ndarray) -> np.ndarray:
        out = np.zeros(len(h), dtype=bool)
        q = cm.partition_of(h, len(self.files))
        for p in np.unique(q).tolist():
            sel = np.flatnonzero(q == p)
            with seg.open_slice(Path(self.out) / self.files[p]) as fh, np.load(fh) as z:
                rh, first = z["hash"], z["first"]
            at = np.minimum(np.searchsorted(rh, h[sel]), max(len(rh) - 1, 0))
            hit = (rh[at] == h[sel]) if len(rh) else np.zeros(len(sel), bool)
            if self.step.keep == "first":
                hit &= first[at] != doc[sel] if len(rh) else hit
            out[sel] = hit
        return out


def _offsets(parent: np.ndarray, keep: np.ndarray, n_docs: int) -> pa.Array:
    counts = np.bincount(parent[keep], minlength=n_docs)
    return pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
