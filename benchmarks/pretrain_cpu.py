"""Where a pretraining run's CPU time goes: CPU seconds of every process of ``tokenmill pretrain``, by role.

    python benchmarks/pretrain_cpu.py [--work DIR] [--src before=PATH] [--src after=src] [--runs 2]

On a 2-core machine shared with other jobs, wall time follows the machine's load; the CPU seconds a run
spends do not (much), and a start-up spread over several processes shows by process. Each ``--src``
(a ``src`` directory of a tokenmill checkout, e.g. a ``git worktree`` of an older commit, put first on
``PYTHONPATH``) runs ``tokenmill pretrain`` on the corpora of ``pretrain_throughput.py`` (built there
if missing): the 44 MB one with the parity-verdict cache emptied (cold) and filled (warm), and the
0.1 MB one warm. Every process of the tree is polled (psutil, every 30 ms) for its user + system CPU
time; processes are named by role: ``main``, ``fork server``, ``forked`` (what the fork server forked:
pool workers and the tokenizer loader) and ``other`` (multiprocessing's resource tracker). The fastest
wall time of ``--runs`` runs and that run's CPU are reported.

Rewrites the "Pretraining track: CPU by process" section of BENCHMARKS.md (``--no-write`` to skip).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

from common import REPO, compile_sources, machine, update_section
from pretrain_throughput import build_corpus, tokenizer_dir

HEADING = "Pretraining track: CPU by process"
STARTUP_HEADING = "Pretraining track: start-up of a small run"


def role(proc: psutil.Process, root: psutil.Process, server: set[int]) -> str:
    cmd = " ".join(proc.cmdline())
    if proc.pid == root.pid:
        return "main"
    if proc.ppid() in server:  # a fork of the server: its command line is the server's
        return "forked"
    if "forkserver import main" in cmd:
        server.add(proc.pid)
        return "fork server"
    return "other"


def measure(cmd: list[str], env: dict) -> dict:
    """Wall seconds and CPU seconds per process (role, cpu) of one run of ``cmd``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    root = psutil.Process(proc.pid)
    cpu: dict[int, float] = {}
    roles: dict[int, str] = {}
    server: set[int] = set()
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        for p in sorted(tree, key=lambda q: q.pid):  # the fork server (older: a lower id) named before its children
            try:
                times = p.cpu_times()
                cpu[p.pid] = times.user + times.system
                if roles.get(p.pid, "other") == "other":
                    roles[p.pid] = role(p, root, server)
            except psutil.Error:
                continue
        time.sleep(0.03)
    err = proc.stderr.read().decode(errors="replace")
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{err[-3000:]}")
    return {"wall_s": time.perf_counter() - start, "procs": [(roles[pid], cpu[pid]) for pid in cpu]}


def best_of(cmd: list[str], env: dict, *, runs: int, cold: bool) -> dict:
    from tokenmill.tokenize.sources import cache_dir

    done = []
    for _ in range(runs):
        if cold:
            shutil.rmtree(cache_dir() / "parity", ignore_errors=True)
        done.append(measure(cmd, env))
    return min(done, key=lambda d: d["wall_s"])


def by_role(procs: list[tuple[str, float]]) -> str:
    order = ("main", "fork server", "forked", "other")
    parts = []
    for name in order:
        mine = sorted((c for r, c in procs if r == name), reverse=True)
        if mine:
            parts.append(f"{name} {' + '.join(f'{c:.2f}' for c in mine)}")
    return "; ".join(parts)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--work", default=str(Path(__file__).resolve().parent / "_work"))
    p.add_argument("--src", action="append", default=None, help="LABEL=PATH of a src directory (default: this one)")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--only", choices=("all", "startup"), default="all",
                   help="startup: only the 0.1 MB run (the start-up figure), each source in turn, --runs times")
    args = p.parse_args(argv)
    compile_sources(*(s.split("=", 1)[1] for s in args.src or []))
    shared, work = Path(args.shared).resolve(), Path(args.work).resolve()
    tok = tokenizer_dir(shared, work)
    kinds = ((0.1, False),) if args.only == "startup" else ((44, True), (44, False), (0.1, False))
    corpora = {mb: build_corpus(shared, work, mb=mb, seed=0) for mb, _ in kinds}
    srcs = [s.split("=", 1) for s in (args.src or [f"this checkout={REPO / 'src'}"])]
    rows = ["| code | run | wall s | CPU s (all processes) | CPU s by process | 1-min load |",
            "|---|---|---:|---:|---|---:|"]
    load_before = os.getloadavg()[0]
    best: dict = {}
    for _ in range(args.runs):  # the sources take turns, so a change of load falls on all of them
        for label, path in srcs:
            env = {**os.environ, "PYTHONPATH": str(Path(path).resolve())}
            for mb, cold in kinds:
                cmd = [str(Path(sys.executable).with_name("tokenmill")), "pretrain", corpora[mb]["dir"] + "/*.parquet",
                       "--out", str(work / f"cpu-{mb:g}"), "--tokenizer", str(tok), "--workers", str(args.workers),
                       "--no-progress", "--overwrite"]
                r = {**best_of(cmd, env, runs=1, cold=cold), "load": os.getloadavg()[0]}
                key = (label, mb, cold)
                if key not in best or r["wall_s"] < best[key]["wall_s"]:
                    best[key] = r
    for (label, mb, cold), r in best.items():
        what = f"{corpora[mb]['mb']:.1f} MB, parity verdict {'not cached' if cold else 'cached'}"
        rows.append(f"| {label} | {what} | {r['wall_s']:.2f} | {sum(c for _, c in r['procs']):.2f} "
                    f"| {by_role(r['procs'])} | {r['load']:.1f} |")
        print(rows[-1], flush=True)
    section = "\n".join([
        f"Machine: {machine()}; 1-minute load average {load_before:.1f} when the run began, "
        f"{os.getloadavg()[0]:.1f} when it ended. `tokenmill pretrain --workers {args.workers}` on the corpora "
        "and Qwen2 tokenizer of the throughput section; fastest wall time of "
        f"{args.runs} runs (the sources taking turns), with that run's CPU seconds (user + system) per process, "
        "polled every 30 ms, and the 1-minute load average when that run ended. "
        "`forked`: the processes the fork server forks (pool workers, the tokenizer loader when one runs). What "
        "each does: `main` imports the CLI, routes every input (samples its records), loads the tokenizer's "
        "metadata and commits units; the tokenizer loader (a child, when the parity verdict must be computed) "
        "builds both encoders and runs the check; each worker imports the track's modules, builds the fast "
        "encoder (unless the fork server built it: then it imports and builds nothing) and reads, encodes and "
        "writes its units. A 0.1 MB corpus is one unit: it runs in the main process.",
        "", "\n".join(rows), "",
        "Reproduce: `python benchmarks/pretrain_cpu.py " + " ".join(argv) + "`",
    ])
    print("\n" + section)
    if not args.no_write:
        update_section(STARTUP_HEADING if args.only == "startup" else HEADING, section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
