"""Many tiny input files against the same records in one file: ``curate --preset gopher`` and ``pretrain`` over
a directory of N small JSONL files and over their concatenation, with this checkout's ``src`` and (``--before``)
another's, side by side in one run: wall and CPU seconds, work units, files written (``strace -f -e
trace=openat``: opens for writing under the output directory, by every process; a second, untimed run) and files
left in the output.

    python benchmarks/tiny_files.py [--n 2000 10000] [--records 2] [--workers 2] [--before /tmp/before/src]
        [--no-trace] [--no-write]

``--before SRC`` is another checkout's ``src`` (``git archive COMMIT src | tar -x -C /tmp/before``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, compile_sources, machine, run_per_process, update_section  # noqa: E402

HEADING = "Many tiny files: small files packed into work units"
OPEN = re.compile(r'^\d+\s+openat\([^,]+, "([^"]+)", ([A-Z_|]+)[^)]*\)\s+=\s+\d+')
WORDS = ("the people of this town have always said that the river was older than the hills and that every "
         "spring it would come back to the fields with news from places nobody here had ever seen; farmers "
         "listened, children laughed, and the old mill kept turning while the market filled with bread, "
         "apples, cloth and stories about weather, prices, travellers and the long road to the coast").split()


def document(rng: random.Random) -> str:
    """A paragraph of plain English-like prose (about 60-110 words) that the Gopher rules mostly keep."""
    sentences = []
    for _ in range(rng.randint(5, 9)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def write_inputs(root: Path, n: int, records: int, seed: int = 0) -> tuple[Path, Path, int]:
    """``root/many/`` with ``n`` files of ``records`` documents each, and ``root/one.jsonl`` with the same
    documents in the same order; returns both and the total bytes."""
    rng = random.Random(seed)
    many = root / "many"
    many.mkdir(parents=True)
    total = 0
    with open(root / "one.jsonl", "w") as one:
        for i in range(n):
            body = "".join(json.dumps({"text": document(rng)}) + "\n" for _ in range(records))
            (many / f"doc-{i:06d}.jsonl").write_text(body)
            one.write(body)
            total += len(body.encode())
    return many, root / "one.jsonl", total


def command(track: str, inputs: Path, out: Path, workers: int) -> list[str]:
    """The run, its standard output to a file beside ``out`` (a summary line per input fills a pipe nobody reads
    until the run ends)."""
    extra = ["--preset", "gopher"] if track == "curate" else []
    run = [sys.executable, "-m", "tokenmill.cli", track, str(inputs), *extra, "--out", str(out),
           "--workers", str(workers), "--no-progress"]
    return ["sh", "-c", 'exec "$0" "$@" > "$LOG"', *run]


def measure(track: str, inputs: Path, out: Path, workers: int, src: Path, trace: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "LOG": str(out) + ".stdout"}
    r = run_per_process(command(track, inputs, out, workers), env=env)
    if r["rc"]:
        raise SystemExit(f"{track} failed ({r['rc']}): {r['stderr'][-3000:]}")
    m = json.loads((out / "manifest.json").read_text())
    row = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "units": m["run"]["units"], "kept": m["counts"]["kept"],
           "left": sum(1 for p in out.rglob("*") if p.is_file())}
    if trace:
        traced, log = out.with_name(out.name + "-traced"), out.with_name(out.name + ".strace")
        cmd = ["strace", "-f", "-qq", "-e", "trace=openat", "-o", str(log), *command(track, inputs, traced, workers)]
        t = run_per_process(cmd, env=env)
        if t["rc"]:
            raise SystemExit(f"traced {track} failed ({t['rc']}): {t['stderr'][-3000:]}")
        row["written"] = files_written(log, traced)
        log.unlink()
    return row


def files_written(log: Path, out: Path) -> int:
    """Opens for writing (``O_WRONLY``, ``O_RDWR`` or ``O_CREAT``) of files under ``out`` in an strace log."""
    root, n = str(out) + "/", 0
    with open(log, errors="replace") as fh:
        for line in fh:
            m = OPEN.match(line)
            if m and m.group(1).startswith(root) and re.search(r"O_WRONLY|O_RDWR|O_CREAT", m.group(2)):
                n += 1
    return n


def report(rows: list[dict], args: argparse.Namespace, load: float) -> str:
    sides = " and ".join(f"`{s}`" for s in dict.fromkeys(r["side"] for r in rows))
    flags = (" --before SRC" if args.before else "") + (f" --before-max-n {args.before_max_n}" if args.before_max_n else "")
    lines = [f"`python benchmarks/tiny_files.py --n {' '.join(map(str, args.n))} --records {args.records} --workers "
             f"{args.workers}{flags}` ({machine()}; 1-min load {load:.1f} at the "
             f"start, a shared machine): `tokenmill curate DIR --preset gopher` and `tokenmill pretrain DIR` over N "
             f"JSONL files of {args.records} English-like documents each (about {rows[0]['file_kb']:.1f} KB a file) "
             f"and over the same documents in one file, {sides} in one run. Files written: opens for writing under "
             "the output directory in a second run under `strace -f` (every process); left: files in the output "
             "when the run has ended.", "",
             "| code | command | input | units | wall s | CPU s | files written | files left | kept |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        written = f"{r['written']:,}" if "written" in r else "-"
        lines.append(f"| {r['side']} | {r['track']} | {r['input']} | {r['units']:,} | {r['wall_s']:.1f} | "
                     f"{r['cpu_s']:.1f} | {written} | {r['left']:,} | {r['kept']:,} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=[2000], help="numbers of tiny files")
    p.add_argument("--records", type=int, default=2, help="documents per tiny file")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--before", type=Path, help="another checkout's src, measured in the same run")
    p.add_argument("--before-max-n", type=int, help="measure --before only up to this many files (it is slow)")
    p.add_argument("--before-label", default="before", help="the name of --before's code in the table")
    p.add_argument("--no-trace", action="store_true", help="skip the strace runs (files written)")
    p.add_argument("--no-write", action="store_true", help="print the section, leave BENCHMARKS.md alone")
    args = p.parse_args(argv)
    sides = {"this version": REPO / "src", **({args.before_label: args.before} if args.before else {})}
    compile_sources(*sides.values())
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tiny-files-") as tmp:
        for n in args.n:
            many, one, size = write_inputs(Path(tmp) / f"in-{n}", n, args.records)
            for side, src in sides.items():
                if side != "this version" and args.before_max_n is not None and n > args.before_max_n:
                    continue
                for track in ("curate", "pretrain"):
                    for label, inputs in ((f"{n:,} files, {size / 1e6:.1f} MB", many), ("one file", one)):
                        out = Path(tmp) / f"{side.replace(' ', '_')}-{track}-{n}-{inputs.name}"
                        row = {"side": side, "track": track, "input": label, "file_kb": size / n / 1e3,
                               **measure(track, inputs, out, args.workers, Path(src), not args.no_trace)}
                        print(json.dumps(row), flush=True)
                        rows.append(row)
    body = report(rows, args, load)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
