"""Exact document dedup on a normalised content hash, across every input, one survivor per group.

Stages (``U`` upstream units, ``B = partition_rows``):

1. ``exact_dedup.hash`` (map, ``U`` units): each document's text is normalised (``normalize``: NFKC,
   lowercase, whitespace collapse by default; also ``punctuation`` and ``digits``) and hashed with
   BLAKE2b-128; ``(hash, doc, priority)`` rows are written split into ``P = ceil(docs / B)`` hash ranges.
   Cost: one normalisation pass (Arrow kernels) and one BLAKE2b per document (about 1 GB/s).
2. ``exact_dedup.groups`` (``P`` units): one hash range (about ``B`` rows) sorted by
   ``(hash, priority, doc)``; in each group of equal hashes the first row survives (``keep``: ``first``,
   the earliest by (unit, row); ``longest``; ``max:<ledger column>``, ties to the earliest). The members
   of groups of two or more are written split by unit.
3. ``exact_dedup`` (documents stage, ``U`` units): rows that are not their group's survivor are removed as
   ``exact_dedup_v1:duplicate``; ledger columns ``exact_dedup.group`` (the survivor's global id, ``-1``
   for a unique document) and ``exact_dedup.group_size``.

Memory: one upstream unit (stages 1 and 3), one hash range of about ``B`` rows of 32 bytes (stage 2).
Empty documents (after normalisation) are grouped like any other text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa

from tokenmill.curate.dedup import common as cm
from tokenmill.engine.outputs import Documents, Partitioned, as_data
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.report.accounting import Stats
from tokenmill.steps.contract import column, reason


@dataclass(frozen=True)
class ExactDedup:
    """Remove documents whose normalised text equals an earlier (or better) one's."""

    normalize: tuple[str, ...] = ("nfkc", "lower", "whitespace")
    keep: str = "first"  # "first", "longest" or "max:<ledger column>"
    partition_rows: int = 4_000_000
    name: str = "exact_dedup"
    version: int = 1
    cluster_size_stat: ClassVar[str] = "group_size"  # the funnel's and the report's cluster table
    id_stats: ClassVar[tuple] = ("group",)

    def __post_init__(self):
        object.__setattr__(self, "normalize", tuple(self.normalize))
        cm.check_normalize(self.normalize, "exact_dedup")
        cm.check_keep(self.keep, "exact_dedup")
        cm.n_partitions(0, self.partition_rows)

    def stages(self, upstream: str) -> list[Stage]:
        return [Stage(f"{self.name}.hash", 1, lambda ctx: _plan_hash(self, upstream, ctx)),
                Stage(f"{self.name}.groups", 1, lambda ctx: _plan_groups(self, upstream, ctx)),
                Stage(self.name, self.version, lambda ctx: _plan_apply(self, upstream, ctx))]


def _plan_hash(step: ExactDedup, upstream: str, ctx: StageContext) -> StagePlan:
    parts = cm.upstream_parts(ctx, upstream)
    p = cm.n_partitions(sum(x.rows for x in parts), step.partition_rows)
    return StagePlan(cm.units_of(parts), HashTask(step, str(ctx.out), p), cm.stage_params(step, partitions=p))


def _plan_groups(step: ExactDedup, upstream: str, ctx: StageContext) -> StagePlan:
    dirs, p = cm.partitioned(ctx, f"{step.name}.hash")
    task = GroupTask(str(ctx.out), dirs, len(dirs), step.name)
    return StagePlan([Unit(i, f"part-{i:05d}", payload=i) for i in range(p)], task, cm.stage_params(step),
                     drop=(f"_work/{step.name}/hash",))


def _plan_apply(step: ExactDedup, upstream: str, ctx: StageContext) -> StagePlan:
    dirs, _ = cm.partitioned(ctx, f"{step.name}.groups")
    return StagePlan(cm.units_of(cm.upstream_parts(ctx, upstream)), ApplyTask(step, str(ctx.out), dirs),
                     cm.stage_params(step), drop=(f"_work/{step.name}/groups",))


def content_hashes(texts, normalize) -> tuple[np.ndarray, np.ndarray]:
    """BLAKE2b-128 of the UTF-8 bytes of each normalised text (read in place from the Arrow buffer, no
    Python string made), as two uint64 arrays (high, low)."""
    norm = cm.normalize_array(texts, normalize).cast(pa.large_string())
    ends = np.frombuffer(norm.buffers()[1], dtype=np.int64)[norm.offset:norm.offset + len(norm) + 1].tolist()
    data = memoryview(norm.buffers()[2] or b"")
    blake = hashlib.blake2b
    raw = b"".join(blake(data[a:b], digest_size=16).digest() for a, b in zip(ends, ends[1:]))
    both = np.frombuffer(raw, dtype=">u8").astype(np.uint64).reshape(-1, 2)
    return both[:, 0].copy(), both[:, 1].copy()


@dataclass(frozen=True)
class HashTask:
    output: ClassVar[type] = Partitioned  # what its units hand on, checked at commit (engine/outputs.py)
    step: ExactDedup
    out: str
    partitions: int

    @property
    def segments(self) -> tuple[str, ...]:  # its units' files go to segment files (base/segments.py)
        return (f"_work/{self.step.name}/hash",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        part: cm.DocsPart = unit.payload
        table = cm.read_docs(Path(self.out), part)
        prio = cm.priorities(self.step.keep, table, cm.read_ledger(Path(self.out), part))
        hi, lo = content_hashes(table.column("text").combine_chunks(), self.step.normalize)
        doc = cm.global_ids(unit.index, table.num_rows)
        rel = f"_work/{self.step.name}/hash/{unit.name}"
        cm.write_partitioned(staging / rel, cm.partition_of(hi, self.partitions), self.partitions,
                             {"hi": hi, "lo": lo, "doc": doc, "prio": prio})
        return UnitResult(stats=Stats(input=table.num_rows, kept=table.num_rows),
                          data=as_data(Partitioned(rel, self.partitions)))


@dataclass(frozen=True)
class GroupTask:
    out: str
    dirs: tuple[str, ...]
    n_units: int
    name: str

    @property
    def segments(self) -> tuple[str, ...]:
        return (f"_work/{self.name}/groups",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        g = cm.read_partition([Path(self.out) / d for d in self.dirs], unit.payload, ["hi", "lo", "doc", "prio"])
        order = np.lexsort((g["doc"], g["prio"], g["lo"], g["hi"]))
        hi, lo, doc = g["hi"][order], g["lo"][order], g["doc"][order].astype(np.int64)
        start = np.concatenate([[True], (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])]) if len(doc) else np.zeros(0, bool)
        group_id = np.cumsum(start) - 1
        sizes = np.bincount(group_id) if len(doc) else np.zeros(0, np.int64)
        size = sizes[group_id] if len(doc) else np.zeros(0, np.int64)
        survivor = doc[np.flatnonzero(start)][group_id] if len(doc) else doc
        dup = size > 1
        rel = f"_work/{self.name}/groups/{unit.name}"
        doc, survivor, size = doc[dup], survivor[dup], size[dup].astype(np.int64)
        cm.write_partitioned(staging / rel, cm.unit_of(doc), self.n_units,
                             {"doc": doc, "survivor": survivor, "size": size}, order=(doc,))
        return UnitResult(data={"dir": rel, "rows_held": len(order), "grouped": int(dup.sum())})


@dataclass(frozen=True)
class ApplyTask:
    output: ClassVar[type] = Documents  # what its units hand on, checked at commit (engine/outputs.py)
    step: ExactDedup
    out: str
    dirs: tuple[str, ...]

    @property
    def segments(self) -> tuple[str, ...]:  # its documents are an intermediate (base/segments.py)
        return (f"steps/{self.step.name}/docs",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        part: cm.DocsPart = unit.payload
        table = cm.read_docs(Path(self.out), part)
        got = cm.read_partition([Path(self.out) / d for d in self.dirs], unit.index, ["doc", "survivor", "size"])
        rows = cm.row_of(got["doc"].astype(np.int64))
        group = np.full(table.num_rows, -1, dtype=np.int64)
        size = np.ones(table.num_rows, dtype=np.int64)
        group[rows], size[rows] = got["survivor"], got["size"]
        dup = np.zeros(table.num_rows, dtype=bool)
        dup[rows] = got["survivor"] != got["doc"]
        why = reason(self.step, "duplicate")
        decision = cm.Decision(columns={column(self.step, "group"): group, column(self.step, "group_size"): size},
                               reasons=[why if d else None for d in dup.tolist()])
        return cm.write_documents(staging, self.step.name, part, table, decision)
