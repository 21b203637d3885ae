"""Files written and read per GB by each dedup stage (MinHash and exact), at 1 and 2 workers.

    python benchmarks/dedup_files.py [--mb 20] [--file-mb 4] [--workers 1 2] [--workdir DIR]

The input is ``dedup_scale.build_input`` (edited crawl text in JSONL files of ``--file-mb`` MB: the work
units). Each pipeline (the JSONL source stage, then ``minhash_dedup`` at its defaults, or ``exact_dedup``)
runs under ``strace -f -e trace=openat``; every successful open under the output directory counts, by the
stage its path names (``_work/<step>/<stage>/``, ``_state/<stage>/``, ``steps/<step>/``; the rest is
``other``). A write is an open with ``O_WRONLY``, ``O_RDWR`` or ``O_CREAT``; a read is any other open of a
file. Figures are per GB of input, so a count that grows with the number of units shows as the same number
per GB at every size, and one that grows with the partitions squared (the components' messages) as more.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from common import machine, run_per_process
from dedup_scale import build_input

OPEN = re.compile(r'^\d+\s+openat\([^,]+, "([^"]+)", ([A-Z_|]+)[^)]*\)\s+=\s+(\d+)')
STAGES = ("signatures", "buckets", "verify", "verified", "components", "hash", "groups")


def stage_of(path: str, out: str) -> str:
    rel = path[len(out):].lstrip("/")
    parts = rel.split("/")
    if parts[0] == "_state" and len(parts) > 1:
        return parts[1]
    for p in parts:
        for s in STAGES:
            if p == s:
                return "verify" if s == "verified" else s
    if parts[0] == "steps":
        return "filter"
    if parts[0] == "source":
        return "source"
    return "other"


def traced(which: str, corpus: Path, out: Path, workers: int, trace: Path) -> dict:
    cmd = ["strace", "-f", "-qq", "-e", "trace=openat", "-o", str(trace), sys.executable, __file__, "_run", which,
           str(corpus), str(out), str(workers)]
    r = run_per_process(cmd, env={**os.environ})
    if r["rc"]:
        raise SystemExit(f"{which} failed: {r['stderr'][-3000:]}")
    writes: Counter = Counter()
    reads: Counter = Counter()
    root = str(out)
    with open(trace, errors="replace") as fh:
        for line in fh:
            m = OPEN.match(line)
            if not m or not m.group(1).startswith(root + "/") or "O_DIRECTORY" in m.group(2):
                continue
            where = stage_of(m.group(1), root)
            (writes if any(f in m.group(2) for f in ("O_WRONLY", "O_RDWR", "O_CREAT")) else reads)[where] += 1
    trace.unlink()
    return {"writes": dict(writes), "reads": dict(reads)}


def _run(which: str, corpus: str, out: str, workers: int) -> None:
    from bench_dedup_source import jsonl_source_stage
    from tokenmill.curate.dedup.exact import ExactDedup
    from tokenmill.curate.dedup.minhash import MinHashDedup
    from tokenmill.engine import LocalExecutor, run_workflow

    step = ExactDedup() if which == "exact" else MinHashDedup()
    files = sorted(str(p) for p in Path(corpus).glob("*.jsonl"))
    run_workflow([jsonl_source_stage(files), *step.stages("source")], out=out, fingerprint="bench",
                 executor=LocalExecutor(workers=workers))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="/work/shared/data")
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--file-mb", type=float, default=4)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="tokenmill-dedup-files-"))
    corpus = root / "corpus"
    info = build_input(corpus, args.mb, args.file_mb, Path(args.shared))
    gb = info["bytes"] / 1e9
    print(json.dumps({"machine": machine(), "input": info}), flush=True)
    for which in ("minhash", "exact"):
        for w in args.workers:
            got = traced(which, corpus, root / f"out-{which}-{w}", w, root / f"trace-{which}-{w}")
            per_gb = {kind: {k: round(v / gb) for k, v in sorted(c.items())} for kind, c in got.items()}
            print(json.dumps({"pipeline": which, "workers": w, "units": info["files"], "per_gb": per_gb,
                              "total": {k: sum(c.values()) for k, c in got.items()}}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_run":
        _run(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
