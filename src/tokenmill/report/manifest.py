"""``manifest.json``: what a run read, what it kept, why the rest was not kept, and what it cost."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill import __version__
from tokenmill.base.accounting import Stats
from tokenmill.base.files import atomic_write
from tokenmill.base.memory import process_peak_rss_mb

if TYPE_CHECKING:
    from tokenmill.engine.stage import UnitResult


def peak_rss_mb(results: list[UnitResult]) -> dict[str, float]:
    """Peak resident memory of the main process and of the largest worker (as each unit reported it)."""
    workers = [r.peak_rss_mb for r in results]
    return {"main_mb": process_peak_rss_mb(), "largest_worker_mb": max(workers, default=0.0)}


def step_seconds(results: list[UnitResult]) -> dict[str, float]:
    """Seconds spent in each step over all units (summed across workers)."""
    total: Counter = Counter()
    for r in results:
        total.update(r.step_seconds)
    return {k: round(v, 3) for k, v in sorted(total.items())}


def build_manifest(
    *,
    track: str,
    inputs: list[dict],
    tokenizer: dict,
    config: dict,
    results: list[UnitResult],
    shards: list[str],
    seconds: float,
    report: dict | None = None,
) -> dict[str, Any]:
    """The manifest of a run whose last stage gave ``results`` and wrote ``shards`` (stems, in order)."""
    total = Stats()
    for r in results:
        total = total + r.stats
    return {
        "tokenmill": __version__,
        "track": track,
        "inputs": inputs,
        "tokenizer": tokenizer,
        "config": config,
        "counts": total.to_dict(),
        "identity": total.identity_line(),
        "shards": shards,
        "report": report or {},
        "run": {"seconds": round(seconds, 3), "peak_rss": peak_rss_mb(results), "units": len(results),
                "step_seconds": step_seconds(results)},
    }


def write_manifest(out: Path, manifest: dict) -> Path:
    path = Path(out) / "manifest.json"
    atomic_write(path, json.dumps(manifest, indent=2, sort_keys=False, default=str).encode() + b"\n")
    return path
