"""Files at scale: how many files ``curate --preset dclm`` writes and reads per GB of input, at 1 and 4 workers,
counted from the system calls (``strace -f -e trace=openat``: every successful open under the output or input
directory, by every process of the run), and the files left in the output per stage.

    python benchmarks/files_scale.py [--mb 20] [--workers 1 4] [--shared ../shared/data] [--model M] [--no-write]

A write is an open with ``O_WRONLY``, ``O_RDWR`` or ``O_CREAT``; a read an ``O_RDONLY`` open of a file (not a
directory listing). Temporary files that are renamed into place count once, as the open that wrote them.
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

from common import REPO, machine, run_per_process, update_section  # noqa: E402
from crawl_corpus import write_corpus  # noqa: E402

HEADING = "Files at scale: files written and read per GB of input"
OPEN = re.compile(r'^\d+\s+openat\([^,]+, "([^"]+)", ([A-Z_|]+)[^)]*\)\s+=\s+(\d+)')


def traced_curate(corpus: Path, out: Path, model: str, workers: int, trace: Path) -> dict:
    cmd = ["strace", "-f", "-qq", "-e", "trace=openat", "-o", str(trace), sys.executable, "-m", "tokenmill.cli", "curate",
           str(corpus), "--out", str(out), "--preset", "dclm", "--quality-model", model, "--workers", str(workers),
           "--no-progress"]
    r = run_per_process(cmd, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    if r["rc"]:
        raise SystemExit(f"curate failed: {r['stderr'][-3000:]}")
    return {"opens": count_opens(trace, out, corpus), "left": files_left(out), "wall_s": r["wall_s"],
            "units": json.loads((out / "manifest.json").read_text())["run"]["units"]}


def count_opens(trace: Path, out: Path, corpus: Path) -> dict:
    writes: Counter = Counter()
    reads: Counter = Counter()
    roots = (str(out) + "/", str(corpus))
    with open(trace, errors="replace") as fh:
        for line in fh:
            m = OPEN.match(line)
            if not m or not m.group(1).startswith(roots) or "O_DIRECTORY" in m.group(2):
                continue
            path, flags = m.group(1), m.group(2)
            where = stage_of(path, out, corpus)
            if "O_WRONLY" in flags or "O_RDWR" in flags or "O_CREAT" in flags:
                writes[where] += 1
            else:
                reads[where] += 1
    return {"writes": writes, "reads": reads}


def stage_of(path: str, out: Path, corpus: Path) -> str:
    if path == str(corpus):
        return "input"
    rel = Path(path).relative_to(out).parts
    if rel[0] == "_state" and len(rel) > 1:
        return f"_state/{rel[1]}"
    return rel[0] if len(rel) > 1 else "(top level)"


def files_left(out: Path) -> Counter:
    left: Counter = Counter()
    for p in out.rglob("*"):
        if p.is_file():
            left[stage_of(str(p), out, Path("/nonexistent"))] += 1
    return left


def report(runs: dict, info: dict, args: argparse.Namespace, load: float) -> str:
    gb = info["bytes"] / 1e9
    lines = [f"`python benchmarks/files_scale.py --mb {args.mb:g}` ({machine()}; 1-min load {load:.1f}): "
             f"`tokenmill curate FILE --preset dclm` on one {info['bytes'] / 1e6:.0f} MB JSONL file of crawl text "
             f"({info['docs']:,} documents, `benchmarks/crawl_corpus.py`), the automatic unit size; opens counted "
             "with strace over every process.", "",
             "| workers | units | files written | files read | files left in the output | written per GB | read per GB |",
             "|---|---|---|---|---|---|---|"]
    for w, r in runs.items():
        wr, rd, left = sum(r["opens"]["writes"].values()), sum(r["opens"]["reads"].values()), sum(r["left"].values())
        lines.append(f"| {w} | {r['units']} | {wr:,} | {rd:,} | {left:,} | {wr / gb:,.0f} | {rd / gb:,.0f} |")
    first = next(iter(runs.values()))
    lines += ["", f"Per stage (workers {next(iter(runs))}): files written / read / left, per unit of input "
              f"({first['units']} units):", "", "| where | written | read | left | written per unit |", "|---|---|---|---|---|"]
    keys = sorted(set(first["opens"]["writes"]) | set(first["opens"]["reads"]) | set(first["left"]))
    for k in keys:
        w, rd, left = first["opens"]["writes"][k], first["opens"]["reads"][k], first["left"][k]
        lines.append(f"| {k} | {w:,} | {rd:,} | {left:,} | {w / first['units']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mb", type=float, default=20)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--model", required=True, help="a quality model (tokenmill quality train)")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tokenmill-files-") as tmp:
        work = Path(tmp)
        corpus = work / "crawl.jsonl"
        info = write_corpus(corpus, shared=Path(args.shared), mb=args.mb)
        load = os.getloadavg()[0]
        runs = {w: traced_curate(corpus, work / f"out{w}", args.model, w, work / f"trace{w}.txt") for w in args.workers}
    body = report(runs, info, args, load)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
