"""Peak memory and CPU of ``tokenmill curate --preset gopher`` on one very long document.

    python benchmarks/long_document.py [--mb 100] [--before-src DIR] [--shared ../shared/data]

The document: real crawl pages (``crawl_corpus.base_documents``) drawn with replacement (seed 0) and joined by
blank lines until ``--mb`` MB of UTF-8 text, one JSONL record. ``tokenmill curate DOC --preset gopher
--workers 1`` runs in a fresh process tree (this checkout's ``src``, and first ``--before-src DIR`` when given);
the peak RSS of every process of the tree is polled every 100 ms (``common.run_per_process``), CPU seconds are
the tree's user + system time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine, run_per_process  # noqa: E402
from crawl_corpus import base_documents  # noqa: E402


def write_document(path: Path, shared: Path, mb: float) -> int:
    docs = base_documents(shared)
    rng = np.random.default_rng(0)
    parts, total = [], 0
    while total < mb * 1e6:
        text = docs[int(rng.integers(len(docs)))][0]
        parts.append(text)
        total += len(text.encode())
    path.write_text(json.dumps({"id": "long", "text": "\n\n".join(parts)}) + "\n", encoding="utf-8")
    return total


def curate(src: Path, doc: Path, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    run = run_per_process([sys.executable, "-m", "tokenmill.cli", "curate", str(doc), "--out", str(out), "--preset",
                           "gopher", "--workers", "1", "--no-progress"], poll_s=0.1, env=env)
    if run["rc"] != 0:
        raise SystemExit(f"curate failed:\n{run['stderr'][-3000:]}")
    ledger = json.loads((out / "manifest.json").read_text())["counts"]
    return {"peak_mb": max(run["peak_rss_mb"].values()), "cpu_s": run["cpu_s"], "wall_s": run["wall_s"],
            "counts": ledger}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--before-src", type=Path)
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tokenmill-longdoc-") as tmp:
        doc = Path(tmp) / "long.jsonl"
        size = write_document(doc, args.shared, args.mb)
        load = os.getloadavg()
        sides = ([("before", args.before_src)] if args.before_src else []) + [("this checkout", REPO / "src")]
        rows = [(name, curate(src, doc, Path(tmp) / f"out{i}")) for i, (name, src) in enumerate(sides)]
    print(f"One document of {size / 1e6:.1f} MB, `curate --preset gopher --workers 1` ({machine()}; load average "
          f"{load[0]:.1f} at the start)\n")
    print("| side | peak RSS MB (largest process) | CPU s | wall s | kept |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r['peak_mb']:,.0f} | {r['cpu_s']:.1f} | {r['wall_s']:.1f} | {r['counts'].get('kept')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
