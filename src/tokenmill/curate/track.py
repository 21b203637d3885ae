"""Curation steps inside another track's pass (``tokenmill pretrain --preset``, or ``steps:``).

The pretraining task calls :meth:`UnitLedger.apply` on every ``Document`` batch before tokenizing: the
cascade runs, filtered documents are counted by reason in the unit's stats, and the unit's ledger part is
written beside the shards (``steps/pretrain/ledger/<unit>.parquet``). :func:`funnel_section` then writes the
run's decision ledger (``ledger/<unit>.parquet``, one row per input record: :mod:`tokenmill.report.ledger`) and
records the steps, the ledger files and the funnel in the run's manifest, so ``tokenmill funnel`` reads a
pretraining run too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from tokenmill.curate.callables import PlainStep
from tokenmill.curate.cascade import Cascade
from tokenmill.curate.step import step_entry
from tokenmill.curate.tasks import _concat_ledger, _write, kept_locs
from tokenmill.report.ledger import write_ledger

STAGE = "pretrain"


class UnitLedger:
    def __init__(self, cascade: Cascade, staging: Path, unit_name: str):
        self.cascade, self.staging, self.rel = cascade, staging, f"steps/{STAGE}/ledger/{unit_name}.parquet"
        self.parts: list[pa.RecordBatch] = []  # the task's setup() set the steps up, once per worker
        self.seconds: Counter = Counter()  # time per step, for the unit's result

    def apply(self, docs: pa.RecordBatch, raw: Any, rejects: list, stats: Any) -> pa.RecordBatch:
        """The documents no step removed (text as the modifiers left it); counts go into ``stats``."""
        if docs.num_rows == 0:
            return docs
        result = self.cascade(docs, kept_locs(raw, rejects))
        self.parts.append(result.ledger)
        for reason, n in result.filtered.items():
            stats.filter(reason, n)
        stats.extra.update(result.counts)
        self.seconds.update(result.seconds)
        return result.kept

    def close(self) -> str | None:
        table = _concat_ledger(self.parts)
        if table is None:
            return None
        _write(self.staging / self.rel, table)
        return self.rel


def is_doc_steps(steps: Sequence[Any]) -> bool:
    return bool(steps) and all(callable(getattr(s, "score", None)) and callable(getattr(s, "decide", None))
                               for s in steps)


def funnel_section(out: Path, manifest: dict, steps: Sequence[Any], units: Sequence[str]) -> dict:
    """Write the decision ledger of ``units``; the steps, ledger files and funnel of a pretraining manifest
    (``manifest``: the rest of it, which the funnel reads)."""
    from tokenmill.curate.funnel import funnel_from_ledger  # its reports' modules: not in every pretraining worker

    parts = Path(out) / "steps" / STAGE / "ledger"
    section = {"steps": [step_entry(s, STAGE, "plain" if isinstance(s, PlainStep) else "document") for s in steps],
               "stage_ledgers": {STAGE: sorted(str(p.relative_to(out)) for p in parts.glob("*.parquet"))}}
    section["decision_ledger"] = write_ledger(Path(out), section["stage_ledgers"], list(units))
    manifest["config"].setdefault("score_removed", True)
    section["funnel"] = funnel_from_ledger(Path(out), {**manifest, **section})
    return section
