"""The one applicator of document steps inside a track's task: the cascade, counted, its ledger part written.

Every track that runs steps on its records (``pretrain``, ``sft``) calls :meth:`UnitLedger.apply` on each
``Document``-shaped batch: the cascade (:mod:`tokenmill.steps.cascade`) runs, removed records are counted by
reason in the unit's stats, and the unit's ledger part (``steps/<stage>/ledger/<unit>.parquet``: ``id``,
``source``, ``loc``, the steps' score columns, ``kept``, ``reason``) is written beside the unit's outputs. The
run's decision ledger (:mod:`tokenmill.report.ledger`) joins the parts unit by unit, so ``tokenmill funnel``
reads every track's run the same way. ``tokenmill curate`` writes the same parts from its own map stages.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.steps.cascade import Cascade, CascadeResult


def ledger_part(stage: str, unit: str) -> str:
    """A unit's ledger part, relative to the output directory."""
    return f"steps/{stage}/ledger/{unit}.parquet"


class UnitLedger:
    """One unit's cascade and ledger part. The task's ``setup()`` set the steps up, once per worker."""

    def __init__(self, cascade: Cascade, staging: Path, stage: str, unit_name: str):
        self.cascade, self.staging, self.rel = cascade, staging, ledger_part(stage, unit_name)
        self.parts: list[pa.RecordBatch] = []
        self.seconds: Counter = Counter()  # time per step, for the unit's result
        self.later: dict[int, str | None] = {}  # loc -> what became of a kept record after the steps

    def run(self, docs: pa.RecordBatch, locs: Any, stats: Any) -> CascadeResult | None:
        """The cascade over ``docs`` (None for an empty batch); removals counted into ``stats`` by reason."""
        if docs.num_rows == 0:
            return None
        result = self.cascade(docs, locs)
        self.parts.append(result.ledger)
        for reason, n in result.filtered.items():
            stats.filter(reason, n)
        stats.extra.update(result.counts)
        self.seconds.update(result.seconds)
        return result

    def apply(self, docs: pa.RecordBatch, raw: Any, rejects: list, stats: Any) -> pa.RecordBatch:
        """The documents no step removed (text as the modifiers left it); counts go into ``stats``."""
        result = self.run(docs, kept_locs(raw, rejects), stats)
        return docs if result is None else result.kept

    def removed(self, loc: int, reason: str) -> None:
        """A record the steps kept was removed later in the task (the SFT track's corpus steps): its reason."""
        self.later[int(loc)] = reason

    def rejected(self, loc: int) -> None:
        """A record the steps kept was rejected later (it could not be rendered): its row leaves the part, the
        unit's rejects hold it (the decision ledger adds a row per reject)."""
        self.later[int(loc)] = None

    def close(self) -> str | None:
        """Write the unit's ledger part; its path relative to the output directory (None: no record seen)."""
        table = concat_ledger(self.parts)
        if table is None:
            return None
        write_table(self.staging / self.rel, _overruled(table, self.later) if self.later else table)
        return self.rel


def _overruled(table: pa.Table, later: dict[int, str | None]) -> pa.Table:
    """``table`` with what became of its kept rows after the steps: removed (not kept, the reason given) or
    rejected (the row gone)."""
    locs = table.column("loc").to_numpy(zero_copy_only=False)
    kept = table.column("kept").to_numpy(zero_copy_only=False).astype(bool)
    reasons = np.array(table.column("reason").to_pylist(), dtype=object)
    fate = [later.get(int(loc), "") for loc in locs]
    removed = np.array([bool(f) for f in fate], dtype=bool) & kept
    reasons[removed] = [f for f, r in zip(fate, removed) if r]
    kept &= ~removed
    table = table.set_column(table.column_names.index("kept"), "kept", pa.array(kept, pa.bool_()))
    table = table.set_column(table.column_names.index("reason"), "reason", pa.array(reasons.tolist(), pa.string()))
    gone = np.array([f is None for f in fate], dtype=bool) & kept
    return table.filter(pa.array(~gone))


def kept_locs(raw: Any, rejects: list) -> np.ndarray:
    """The line/row of each document ``to_documents`` kept (its rejects are gone from the batch)."""
    gone = {r.loc for r in rejects}
    return np.array([loc for loc in raw.locs if loc not in gone], dtype=np.int64)


def concat_ledger(batches: list[pa.RecordBatch]) -> pa.Table | None:
    """One table of a unit's ledger batches (their score columns may differ: a step scored only some)."""
    if not batches:
        return None
    return pa.Table.from_batches(batches).combine_chunks() if len({b.schema for b in batches}) == 1 else \
        pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="permissive")


def write_table(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")
