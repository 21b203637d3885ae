"""A stage's completion state as the tests look at it (``engine/workflow.py``): an ended stage keeps one
``index.jsonl``; a stage still running keeps its commit journals (a line per committed unit, one file per
worker process) under ``done/``, where ``done/<unit>.json`` markers are read too (``engine/journal.py``).

``reopen(out, key)`` turns an ended stage back into the state a run leaves when it is killed after the
stage's last commit and before its index: a marker per unit, no index. A test then removes markers to
stand for units a killed run had not committed.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenmill.engine.journal import committed_results


def state_dir(out: Path, key: str) -> Path:
    return Path(out) / "_state" / key


def reopen(out: Path, key: str) -> Path:
    """Write the index's results back as ``done/<unit>.json`` markers, remove the index; return ``done/``."""
    root = state_dir(out, key)
    done = root / "done"
    done.mkdir(parents=True, exist_ok=True)
    for line in (root / "index.jsonl").read_text().splitlines():
        row = json.loads(line)
        (done / f"{row['unit']}.json").write_text(json.dumps(row["result"], sort_keys=True))
    (root / "index.jsonl").unlink()
    return done


def count(done: Path) -> int:
    """How many units the journals (and markers) in a stage's ``done/`` directory record as committed."""
    return len(committed_results(Path(done)))


def committed(out: Path, key: str) -> list[str]:
    """The names of the stage's committed units: from its index when it has ended, else its journals."""
    root = state_dir(out, key)
    if (root / "index.jsonl").exists():
        return [json.loads(line)["unit"] for line in (root / "index.jsonl").read_text().splitlines()]
    return sorted(committed_results(root / "done"))


def results(out: Path, key: str) -> dict[str, dict]:
    """The stage's results by unit name (index, or journals and markers)."""
    root = state_dir(out, key)
    if (root / "index.jsonl").exists():
        return {r["unit"]: r["result"] for r in map(json.loads, (root / "index.jsonl").read_text().splitlines())}
    return dict(sorted(committed_results(root / "done").items()))
