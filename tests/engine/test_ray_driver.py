"""The Ray executor: a driver that joins a running cluster and is killed midway resumes to the same bytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")

from test_workflow import _tree  # noqa: E402

import statekit

SRC = os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"), str(Path(__file__).resolve().parent)])


@pytest.fixture
def cluster(ray_cluster):
    return ray_cluster


DRIVER = textwrap.dedent("""
    import sys, time, json
    from dataclasses import dataclass
    from pathlib import Path
    from tokenmill.engine import Stage, StagePlan, Unit, UnitResult, run_workflow
    from tokenmill.engine.ray import RayExecutor

    @dataclass(frozen=True)
    class Slow:
        def __call__(self, unit, staging):
            time.sleep(0.3)
            (staging / f"{unit.name}.json").write_text(json.dumps(list(range(unit.index * 5))))
            return UnitResult()

    stage = Stage("slow", 1, lambda ctx: StagePlan([Unit(i, f"unit-{i:06d}") for i in range(12)], Slow()))
    run_workflow([stage], out=sys.argv[1], fingerprint="f", executor=RayExecutor(workers=2, address=sys.argv[2]))
""")


def test_a_killed_driver_resumes_to_the_same_bytes(cluster, tmp_path):
    """Drivers that join the running cluster (``--ray-address``); one is killed midway."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(script), str(out), cluster], env=env)
    done = out / "_state" / "slow_v1" / "done"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and statekit.count(done) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 2 <= statekit.count(done) < 12
    assert subprocess.run([sys.executable, str(script), str(out), cluster], env=env).returncode == 0
    assert subprocess.run([sys.executable, str(script), str(tmp_path / "clean"), cluster], env=env).returncode == 0
    assert _tree(out) == _tree(tmp_path / "clean")
    assert json.loads((out / "unit-000003.json").read_text()) == list(range(15))
