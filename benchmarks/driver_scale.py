"""The driver at 100,000 units: plan, run and resume a workflow of tiny units whose task does nothing, so every
second and every megabyte measured is the engine's own (planning, submitting, committing, markers, resume).

    python benchmarks/driver_scale.py [--units 100000] [--workers 2] [--stages 1] [--no-write]

Each phase runs in a fresh process (``--phase``), measured from inside: the driver's own CPU seconds
(``RUSAGE_SELF``: user + system of the driver process, not its workers) and its peak RSS (``ru_maxrss``).
Phases: ``run`` (nothing committed), ``resume`` (everything committed: planning plus reading the markers),
``resume-10%`` (one marker in ten removed, those units redone). A profile of the driver (cProfile, top
functions by own time) is printed with ``--profile``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tokenmill.engine.stage import Stage, StagePlan, Unit, UnitResult  # noqa: E402

HEADING = "The driver at 100,000 units"


def noop(unit: Unit, staging: Path) -> UnitResult:
    """The no-op task: no output file, an empty result."""
    return UnitResult()


def stages(n_units: int, n_stages: int) -> list[Stage]:
    def plan(ctx):
        return StagePlan(units=[Unit(index=i, name=f"{i:06d}", size=1) for i in range(n_units)], task=noop)

    return [Stage(name=f"noop{k}", version=1, plan=plan) for k in range(n_stages)]


def phase(out: Path, n_units: int, n_stages: int, workers: int, profile: bool) -> dict:
    from tokenmill.engine.local import LocalExecutor
    from tokenmill.engine.workflow import run_workflow

    started = time.perf_counter()

    def go():
        with LocalExecutor(workers=workers) as ex:
            return run_workflow(stages(n_units, n_stages), out=out, fingerprint="driver-scale", executor=ex)

    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        results = prof.runcall(go)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(15)
    else:
        results = go()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall_s": time.perf_counter() - started, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
            "results": sum(len(r) for r in results.values())}


def measure(out: Path, args: argparse.Namespace, name: str) -> dict:
    cmd = [sys.executable, __file__, "--phase", str(out), "--units", str(args.units), "--stages", str(args.stages),
           "--workers", str(args.workers)] + (["--profile"] if args.profile else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{name} failed: {proc.stderr[-3000:]}")
    if args.profile:
        print(f"--- {name}\n{proc.stderr}", file=sys.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def drop_markers(out: Path, every: int) -> int:
    """What a run killed near the end of every stage leaves: a marker per unit but one in ``every``, no index."""
    from common import reopen_stage

    dropped = 0
    for done in [reopen_stage(d) for d in sorted((out / "_state").glob("*_v*")) if (d / "index.jsonl").is_file()]:
        for i, entry in enumerate(sorted(os.scandir(done), key=lambda e: e.name)):
            if i % every == 0:
                os.unlink(entry.path)
                dropped += 1
    return dropped


def report(rows: dict, args: argparse.Namespace, load: float) -> str:
    from common import machine

    lines = [f"`python benchmarks/driver_scale.py --units {args.units} --workers {args.workers} --stages {args.stages}` "
             f"({machine()}; 1-min load {load:.1f} at the start): {args.units:,} units per stage, a task that does "
             "nothing, the local executor; each phase a fresh driver process.", "",
             "| phase | units run | driver CPU s | driver peak RSS | wall s |", "|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['ran']:,} | {r['cpu_s']:.1f} | {r['rss_mb']:.0f} MB | {r['wall_s']:.1f} |")
    lines += ["", "Goal: driver RSS at most 1 GB and at most 60 s of driver CPU at 100,000 units; resume reads the "
              "markers with one directory listing per stage."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--units", type=int, default=100_000)
    p.add_argument("--stages", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--phase", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.phase:
        print(json.dumps(phase(Path(args.phase), args.units, args.stages, args.workers, args.profile)))
        return 0
    load = os.getloadavg()[0]
    rows = {}
    with tempfile.TemporaryDirectory(prefix="tokenmill-driver-") as tmp:
        out = Path(tmp) / "out"
        rows["run"] = {**measure(out, args, "run"), "ran": args.units * args.stages}
        rows["resume (all committed)"] = {**measure(out, args, "resume"), "ran": 0}
        dropped = drop_markers(out, 10)
        rows["resume (1 marker in 10 removed)"] = {**measure(out, args, "resume-10%"), "ran": dropped}
    body = report(rows, args, load)
    print(body)
    if not args.no_write:
        from common import update_section

        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
