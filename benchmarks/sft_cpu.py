"""CPU seconds by process of `tokenmill sft` on the 10,000 conversations of sft_throughput.py, versions in turn.

    python benchmarks/sft_cpu.py [--runs 3] [--examples 10000] [--src LABEL=PATH ...]

The command line run as a user runs it (`tokenmill sft FILES --workers 2`), with the Qwen2 tokenizer and the
Qwen2.5 template of ``sft_throughput.py``; its process tree is polled every 30 ms (``pretrain_cpu.measure``), so
each process's CPU is told apart: ``main`` routes the inputs, loads the tokenizer's metadata, checks the template
and commits units; the ``fork server`` imports the track and builds the fast encoder once; ``forked`` are the
pool workers (normalise, render, encode, mask, write). One untimed run of each version first fills its SFT
verdict cache, so every timed run is a re-run with cached verdicts. Prints one row per run; the sources take turns, so a change of
the machine's load falls on all of them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from common import compile_sources, machine
from pretrain_cpu import by_role, measure

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--examples", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--src", action="append", default=None, help="LABEL=PATH of a src directory (default: this one)")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    import sft_throughput as bench

    shared, work = Path(args.shared).resolve(), HERE / "_work"
    tok = bench.tokenizer_dir(shared, work)
    corpus, _ = bench.build_corpus(shared, work, examples=args.examples, seed=0)
    template = shared / "chat_templates" / bench.TEMPLATE
    srcs = [s.split("=", 1) for s in (args.src or [f"this checkout={HERE.parent / 'src'}"])]
    compile_sources(*(path for _label, path in srcs))
    cmd = [str(Path(sys.executable).with_name("tokenmill")), "sft", *bench.corpus_inputs(corpus),
           "--out", str(work / "sft-cpu"), "--tokenizer", str(tok), "--chat-template", str(template),
           "--workers", str(args.workers), "--no-progress", "--overwrite"]
    print(f"Machine: {machine()}; 1-minute load average {os.getloadavg()[0]:.1f} at the start.\n")
    print("| code | wall s | CPU s (all processes) | CPU s by process | workers' CPU s | 1-min load |")
    print("|---|---:|---:|---|---:|---:|")
    for _label, path in srcs:  # fills each version's verdict cache (the same key for equal rendering code)
        measure(cmd, {**os.environ, "PYTHONPATH": str(Path(path).resolve())})
    for _ in range(args.runs):
        for label, path in srcs:
            r = measure(cmd, {**os.environ, "PYTHONPATH": str(Path(path).resolve())})
            workers = sum(c for role, c in r["procs"] if role == "forked")
            print(f"| {label} | {r['wall_s']:.2f} | {sum(c for _, c in r['procs']):.2f} | {by_role(r['procs'])} "
                  f"| {workers:.2f} | {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
