"""The curation record of a track's run (``tokenmill pretrain`` and ``tokenmill sft`` with steps).

The track's task runs its steps through :class:`tokenmill.steps.ledger.UnitLedger`, which writes each unit's
ledger part (``steps/<stage>/ledger/<unit>.parquet``). :func:`funnel_section` then writes the run's decision
ledger (``ledger/<unit>.parquet``, one row per input record: :mod:`tokenmill.report.ledger`) and records the
steps, the ledger files and the funnel in the run's manifest, so ``tokenmill funnel`` reads a track's run as it
reads a curation run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenmill.report.ledger import write_ledger
from tokenmill.steps.contract import step_entry
from tokenmill.steps.plain import PlainStep

STAGE = "pretrain"


def funnel_section(out: Path, manifest: dict, steps: Sequence[Any], units: Sequence[str], *,
                   stage: str = STAGE) -> dict:
    """Write the decision ledger of ``units``; the steps, ledger files and funnel of a track's manifest
    (``manifest``: the rest of it, which the funnel reads). ``stage``: the stage whose task wrote the parts."""
    from tokenmill.curate.report.funnel import funnel_from_ledger  # its reports' modules: not in every track's worker

    parts = Path(out) / "steps" / stage / "ledger"
    section = {"steps": [step_entry(s, stage, "plain" if isinstance(s, PlainStep) else "document") for s in steps],
               "stage_ledgers": {stage: sorted(str(p.relative_to(out)) for p in parts.glob("*.parquet"))}}
    section["decision_ledger"] = write_ledger(Path(out), section["stage_ledgers"], list(units))
    manifest["config"].setdefault("score_removed", True)
    section["funnel"] = funnel_from_ledger(Path(out), {**manifest, **section})
    return section
