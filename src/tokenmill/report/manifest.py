"""``manifest.json``: what a run read, what it kept, why the rest was not kept, and what it cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenmill import __version__
from tokenmill.engine.local import atomic_write, process_peak_rss_mb
from tokenmill.report.accounting import Stats


def peak_rss_mb(results: list[dict]) -> dict[str, float]:
    """Peak resident memory of the main process and of the largest worker (as each unit reported it)."""
    workers = [r.get("peak_rss_mb", 0.0) for r in results]
    return {"main_mb": process_peak_rss_mb(), "largest_worker_mb": max(workers, default=0.0)}


def build_manifest(
    *,
    track: str,
    inputs: list[dict],
    tokenizer: dict,
    config: dict,
    results: list[dict],
    seconds: float,
    report: dict | None = None,
) -> dict[str, Any]:
    total = Stats()
    for r in results:
        total = total + Stats.from_dict(r["stats"])
    shards = [s for r in results for s in r.get("shards", [])]
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
        "run": {"seconds": round(seconds, 3), "peak_rss": peak_rss_mb(results), "units": len(results)},
    }


def write_manifest(out: Path, manifest: dict) -> Path:
    path = Path(out) / "manifest.json"
    atomic_write(path, json.dumps(manifest, indent=2, sort_keys=False, default=str).encode() + b"\n")
    return path
