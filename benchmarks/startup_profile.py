"""Where the start-up of a small pretraining run goes: one ``tokenmill pretrain`` of the 0.1 MB corpus (one unit,
run in the main process, parity verdict cached), under cProfile, per phase, for each ``--src``.

    python benchmarks/startup_profile.py --src "before=/tmp/before/src" --src "after=src" [--runs 3]

The corpus and tokenizer are those of ``pretrain_throughput.py``. Each source runs ``--runs`` times, the
sources taking turns; the run with the shortest profiled total is reported. cProfile adds its own overhead
(about 10% here), so read the phases against each other and against the unprofiled wall time of
``pretrain_cpu.py --only startup``. A phase is the cumulative time of the functions named beside it; the
imports are those Python runs while the command works (its modules load lazily). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, compile_sources
from pretrain_throughput import build_corpus, tokenizer_dir

PHASES = {  # label: (file suffix, function name) whose cumulative time is the phase
    "whole command (`tokenmill.cli.main`)": ("tokenmill/cli.py", "main"),
    "prepare_run: expand and route inputs, plan units, load the tokenizer's metadata": ("tokenmill/track.py",
                                                                                        "prepare_run"),
    "  of which parse tokenizer.json": ("tokenmill/tokenize/backends.py", "reference_for"),
    "  of which the tokenizer's fingerprint": ("tokenmill/tokenize/tokenizer.py", "tokenizer_fingerprint"),
    "finish_run: run the unit, write the manifest": ("tokenmill/track.py", "finish_run"),
    "  of which the unit: read, documents, encode, write": ("tokenmill/pretrain/run.py", "__call__"),
    "    of which the fast encoder's build": ("tokenmill/tokenize/backends.py", "fast_for"),
    "imports while it runs (inside the phases above)": ("<frozen importlib._bootstrap>", "_find_and_load"),
    "  of which pandas (pyarrow's probe imports it)": ("pandas/__init__.py", "<module>"),
    "  of which pyarrow's probe answered without pandas": ("tokenmill/_arrow.py", "skip_pandas_probe"),
}
MAIN = next(iter(PHASES))
RUNNER = "import sys\nfrom tokenmill.cli import main\nsys.exit(main())\n"


def profile(src: str, cmd: list[str], scratch: Path) -> dict[str, float]:
    out = scratch / "run.prof"
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    runner = scratch / "runner.py"
    runner.write_text(RUNNER)
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), str(runner), *cmd], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    stats = pstats.Stats(str(out)).stats
    found = {}
    for label, (suffix, name) in PHASES.items():
        found[label] = max((v[3] for (f, _, n), v in stats.items() if f.endswith(suffix) and n == name), default=0.0)
    return found


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--work", default=str(Path(__file__).resolve().parent / "_work"))
    p.add_argument("--src", action="append", required=True, help="LABEL=PATH of a src directory")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    compile_sources(*(s.split("=", 1)[1] for s in args.src))
    shared, work = Path(args.shared).resolve(), Path(args.work).resolve()
    tok, corpus = tokenizer_dir(shared, work), build_corpus(shared, work, mb=0.1, seed=0)
    cmd = ["pretrain", corpus["dir"] + "/*.parquet", "--out", str(work / "startup-profile"), "--tokenizer", str(tok),
           "--workers", "2", "--no-progress", "--overwrite"]
    srcs = [s.split("=", 1) for s in args.src]
    best: dict[str, dict] = {}
    loads: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.runs):
            for label, path in srcs:
                got = profile(path, cmd, Path(scratch))
                if label not in best or got[MAIN] < best[label][MAIN]:
                    best[label], loads[label] = got, os.getloadavg()[0]
    labels = [label for label, _ in srcs]
    print("| phase (cProfile cumulative s) | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for phase in PHASES:
        print(f"| {phase} | " + " | ".join(f"{best[label][phase]:.2f}" for label in labels) + " |")
    print("| 1-min load at that run | " + " | ".join(f"{loads[label]:.1f}" for label in labels) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
