"""Files at scale: how many files ``curate --preset dclm`` writes and reads per GB of input, at 1 and 4 workers,
counted from the system calls (``strace -f -e trace=openat,rename,...``: every successful open under the output or input
directory, by every process of the run), and the files left in the output per stage.

    python benchmarks/files_scale.py --model M [--mb 20] [--workers 1 4] [--small-units 1MiB]
        [--before /tmp/before/src] [--shared ../shared/data] [--no-write]

A write is an open with ``O_WRONLY``, ``O_RDWR`` or ``O_CREAT``, or a file renamed into the output from outside
it (``--scratch``: staged on "the node's own disk", where a real one would be copied in); a read an ``O_RDONLY``
open of a file (not a directory listing). Temporary files that are renamed into place count once, as the open
that wrote them. ``--scratch`` also measures this version with ``TOKENMILL_SCRATCH`` set (staging outside the
output): the files opened there are counted apart, as ``(node scratch, not in the output)``.

``--before SRC`` runs every measurement a second time with another checkout's ``src`` (``git archive main src``),
in the same invocation. A last run at 1 worker with ``--small-units`` (more units of the same input) gives,
by difference with the automatic-size run, the files per unit and the files per run; the 100 TB table is
computed from those two numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine, run_per_process, update_section  # noqa: E402
from crawl_corpus import write_corpus  # noqa: E402

HEADING = "Files at scale: files written and read per GB of input"
OPEN = re.compile(r'^\d+\s+openat\([^,]+, "([^"]+)", ([A-Z_|]+)[^)]*\)\s+=\s+(\d+)')
# a file moved in from outside the output (staging on a node's own disk) is written into the output too
RENAME = re.compile(r'^\d+\s+rename(?:at2?)?\((?:[^,"]+, )?"([^"]+)", (?:[^,"]+, )?"([^"]+)"[^)]*\)\s+=\s+0')


def traced_curate(corpus: Path, out: Path, model: str, workers: int, trace: Path, *, src: Path,
                  unit_bytes: str | None = None, scratch: Path | None = None) -> dict:
    cmd = ["strace", "-f", "-qq", "-e", "trace=openat,rename,renameat,renameat2", "-o", str(trace), sys.executable,
           "-m", "tokenmill.cli", "curate",
           str(corpus), "--out", str(out), "--preset", "dclm", "--quality-model", model, "--workers", str(workers),
           "--no-progress", *(["--unit-bytes", unit_bytes] if unit_bytes else [])]
    env = {**os.environ, "PYTHONPATH": str(src)}
    if scratch is not None:  # units stage on "the node's own disk": a directory outside the output
        env["TOKENMILL_SCRATCH"] = str(scratch)
    r = run_per_process(cmd, env=env)
    if r["rc"]:
        raise SystemExit(f"curate failed: {r['stderr'][-3000:]}")
    return {"opens": count_opens(trace, out, corpus, scratch), "left": files_left(out), "wall_s": r["wall_s"],
            "units": json.loads((out / "manifest.json").read_text())["run"]["units"]}


SCRATCH = "(node scratch, not in the output)"


def count_opens(trace: Path, out: Path, corpus: Path, scratch: Path | None = None) -> dict:
    """Opens under the output and of the input, by stage; those under ``scratch`` in one row of their own,
    :data:`SCRATCH`, left out of the totals (they are files on each node's own disk, not the shared one)."""
    writes: Counter = Counter()
    reads: Counter = Counter()
    roots = (str(out) + "/", str(corpus), *([str(scratch) + "/"] if scratch else []))
    with open(trace, errors="replace") as fh:
        for line in fh:
            moved = RENAME.match(line)
            if moved and moved.group(2).startswith(str(out) + "/") and not moved.group(1).startswith(str(out) + "/"):
                writes[stage_of(moved.group(2), out, corpus)] += 1
                continue
            m = OPEN.match(line)
            if not m or not m.group(1).startswith(roots) or "O_DIRECTORY" in m.group(2):
                continue
            path, flags = m.group(1), m.group(2)
            where = SCRATCH if scratch and path.startswith(str(scratch) + "/") else stage_of(path, out, corpus)
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


def totals(r: dict) -> tuple[int, int, int]:
    def shared(c: Counter) -> int:
        return sum(n for k, n in c.items() if k != SCRATCH)
    return shared(r["opens"]["writes"]), shared(r["opens"]["reads"]), sum(r["left"].values())


def per_unit(small: dict, auto: dict) -> dict:
    """Files per unit and per run (written, read, left), from two runs of one input cut into more or fewer units."""
    du = small["units"] - auto["units"]
    out = {}
    for k, (a, b) in zip(("written", "read", "left"), zip(totals(auto), totals(small))):
        unit = (b - a) / du
        out[k] = (unit, a - unit * auto["units"])
    return out


def at_scale(fit: dict, bytes_in: float = 1e14) -> list[tuple[str, float, float]]:
    units = [math.ceil(bytes_in / size) for size in (2**30, 64 * 2**20)]
    return [("units per stage", *units)] + [
        (f"files {k} ({unit:.1f} per unit + {fixed:,.0f} per run)", *(fixed + unit * n for n in units))
        for k, (unit, fixed) in fit.items() if k != "read"]


def report(runs: dict, info: dict, args: argparse.Namespace, load: float) -> str:
    gb = info["bytes"] / 1e9
    sides = list(dict.fromkeys(side for side, _ in runs))
    lines = [f"`python benchmarks/files_scale.py --mb {args.mb:g}{' --before ...' if args.before else ''}` ({machine()}; "
             f"1-min load {load:.1f}): `tokenmill curate FILE --preset dclm` on one {info['bytes'] / 1e6:.0f} MB JSONL "
             f"file of crawl text ({info['docs']:,} documents, `benchmarks/crawl_corpus.py`), the automatic unit size "
             f"unless named; opens counted with strace over every process; {' and '.join(sides)} measured in one "
             "invocation.", "",
             "| code | workers | units | files written | files read | files left in the output | written per GB | "
             "read per GB | left per GB |", "|---|---|---|---|---|---|---|---|---|"]
    for (side, w), r in runs.items():
        wr, rd, left = totals(r)
        lines.append(f"| {side} | {w} | {r['units']} | {wr:,} | {rd:,} | {left:,} | {wr / gb:,.0f} | {rd / gb:,.0f} | "
                     f"{left / gb:,.0f} |")
    first = {side: runs[(side, args.workers[0])] for side in sides}
    units = next(iter(first.values()))["units"]
    lines += ["", f"Per stage ({args.workers[0]} worker{'s' if args.workers[0] > 1 else ''}, {units} units): files "
              "written / left" + (" before and after" if len(sides) > 1 else "") + ":", "",
              "| where | " + " | ".join(f"written ({s}) | left ({s})" for s in sides) + " |",
              "|---|" + "---|---|" * len(sides)]
    keys = sorted({k for r in first.values() for k in (*r["opens"]["writes"], *r["opens"]["reads"], *r["left"])})
    for k in keys:
        cells = " | ".join(f"{first[s]['opens']['writes'][k]:,} | {first[s]['left'][k]:,}" for s in sides)
        lines.append(f"| {k} | {cells} |")
    fits = {s: per_unit(runs[(s, f"1, {args.small_units} units")], runs[(s, 1)]) for s in sides
            if (s, f"1, {args.small_units} units") in runs}
    if fits:
        small = runs[(sides[-1], f"1, {args.small_units} units")]["units"]
        lines += ["", f"Files per unit and per run, from the runs at 1 worker with {units} and with {small} units "
                  "(the difference over the extra units; what is left is the run's own: per stage, per partition, "
                  "the report):", "",
                  "| code | written per unit | written per run | read per unit | read per run | left per unit | "
                  "left per run |", "|---|---|---|---|---|---|---|"]
        for s, fit in fits.items():
            lines.append(f"| {s} | " + " | ".join(f"{fit[k][0]:.1f} | {fit[k][1]:,.0f}" for k in ("written", "read", "left"))
                         + " |")
        lines += ["", "At 100 TB of input (1e14 bytes), from those numbers (the partitions of the grouped stages grow "
                  "with the documents too: see below):", "",
                  "| code | what | `--unit-bytes 1GiB` | automatic (64 MiB) |", "|---|---|---|---|"]
        for s, fit in fits.items():
            for what, a, b in at_scale(fit):
                lines.append(f"| {s} | {what} | {_big(a)} | {_big(b)} |")
    return "\n".join(lines)


def _big(n: float) -> str:
    return f"{n / 1e6:.1f} million" if n >= 1e6 else f"{n:,.0f}"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mb", type=float, default=20)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--model", required=True, help="a quality model (tokenmill quality train)")
    p.add_argument("--before", help="another checkout's src directory, measured in the same invocation")
    p.add_argument("--small-units", default="1MiB", help="the unit size of the run that gives files per unit")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--scratch", action="store_true",
                   help="also measure this version with TOKENMILL_SCRATCH (staging outside the output)")
    args = p.parse_args(argv)
    sides = {"before": Path(args.before), "after": REPO / "src"} if args.before else {"this": REPO / "src"}
    if args.scratch:
        sides[f"{list(sides)[-1]}, TOKENMILL_SCRATCH"] = REPO / "src"
    with tempfile.TemporaryDirectory(prefix="tokenmill-files-") as tmp:
        work = Path(tmp)
        corpus = work / "crawl.jsonl"
        info = write_corpus(corpus, shared=Path(args.shared), mb=args.mb)
        load = os.getloadavg()[0]
        runs = {}
        for k, (side, src) in enumerate(sides.items()):
            scratch = work / f"scratch{k}" if side.endswith("TOKENMILL_SCRATCH") else None
            for w in args.workers:
                runs[(side, w)] = traced_curate(corpus, work / f"out{k}-{w}", args.model, w, work / f"t{k}-{w}.txt",
                                                src=src, scratch=scratch)
                shutil.rmtree(work / f"out{k}-{w}")
                (work / f"t{k}-{w}.txt").unlink()
            key = (side, f"1, {args.small_units} units")
            runs[key] = traced_curate(corpus, work / f"out{k}-small", args.model, 1, work / f"t{k}-small.txt",
                                      src=src, unit_bytes=args.small_units, scratch=scratch)
            shutil.rmtree(work / f"out{k}-small")
    body = report(runs, info, args, load)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
