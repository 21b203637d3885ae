"""A driver that started its own Ray instance, killed with ``kill -9`` with its process group, leaves no actor
running: Ray's own processes (the GCS server, the raylet) die with the group, but the raylet starts each actor in
a process group of its own, and an actor left alone would go on committing units beside the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")

import statekit

SRC = str(Path(__file__).resolve().parents[2] / "src")

DRIVER = textwrap.dedent("""
    import sys, time
    from dataclasses import dataclass
    from tokenmill.engine import Stage, StagePlan, Unit, UnitResult, run_workflow
    from tokenmill.engine.ray import RayExecutor

    @dataclass(frozen=True)
    class Slow:
        def __call__(self, unit, staging):
            time.sleep(1.5)
            (staging / f"{unit.name}.txt").write_text(unit.name)
            return UnitResult()

    stage = Stage("slow", 1, lambda ctx: StagePlan([Unit(i, f"unit-{i:06d}") for i in range(40)], Slow()))
    run_workflow([stage], out=sys.argv[1], fingerprint="f", executor=RayExecutor(workers=2))
""")


def _marked(mark: str) -> dict[int, str]:
    """The processes of this machine whose environment holds ``mark``, with their command lines."""
    found = {}
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            if mark.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


def test_actors_of_a_killed_driver_stop_and_commit_nothing_more(tmp_path):
    mark = f"TOKENMILL_ORPHAN_TEST={uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": SRC, mark.split("=")[0]: mark.split("=")[1]}
    env.pop("RAY_ADDRESS", None)
    out = tmp_path / "out"
    done = out / "_state" / "slow_v1" / "done"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(out)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and statekit.count(done) < 2:
            time.sleep(0.05)
        assert proc.poll() is None and statekit.count(done) >= 2, "the run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)  # the command's process group: the driver, the GCS server, the raylet
        proc.wait()
        time.sleep(1.0)  # an actor ends within half a second of its driver (before: 1 to 3 s, still committing)
        committed = statekit.count(done)
        actors = {pid: cmd for pid, cmd in _marked(mark).items() if "UnitWorker" in cmd}
        time.sleep(4)
        assert not actors, f"actors outlived their driver: {actors}"
        assert statekit.count(done) == committed < 40
    finally:
        for pid in _marked(mark):  # whatever of Ray's own is left (a raylet still exiting)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
