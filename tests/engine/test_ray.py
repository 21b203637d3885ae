"""The Ray executor on a local cluster: the same bytes as the local engine, a killed worker retried, a
killed driver resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")

from test_workflow import _stages, _tree  # noqa: E402

from tokenmill.engine import LocalExecutor, Stage, StagePlan, Unit, UnitResult, run_workflow  # noqa: E402
from tokenmill.engine.ray import RayExecutor  # noqa: E402
from tokenmill.report.accounting import Stats  # noqa: E402

SRC = os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"), str(Path(__file__).resolve().parent)])


@pytest.fixture(scope="module")
def cluster():
    os.environ["PYTHONPATH"] = SRC + os.pathsep + os.environ.get("PYTHONPATH", "")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def test_same_bytes_as_the_local_engine(cluster, tmp_path):
    run_workflow(_stages(), out=tmp_path / "local", fingerprint="f", executor=LocalExecutor(workers=1))
    run_workflow(_stages(), out=tmp_path / "ray", fingerprint="f", executor=RayExecutor(workers=2))
    assert _tree(tmp_path / "ray") == _tree(tmp_path / "local")


@dataclass(frozen=True)
class DieOnce:
    """Kills its own worker process the first time it sees unit 1, mid-unit (after writing a partial file)."""

    flags: str

    def setup(self) -> None:
        Path(self.flags, f"setup-{os.getpid()}").touch()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        (staging / f"{unit.name}.txt").write_text("partial")
        flag = Path(self.flags) / f"died-{unit.index}"
        if unit.index == 1 and not flag.exists():
            flag.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        (staging / f"{unit.name}.txt").write_text(f"unit {unit.index}\n")
        return UnitResult(stats=Stats(input=1, kept=1))


def test_a_killed_worker_is_retried_and_the_output_is_the_same(cluster, tmp_path):
    flags = tmp_path / "flags"
    flags.mkdir()
    stage = Stage("die", 1, lambda ctx: StagePlan([Unit(i, f"unit-{i:06d}") for i in range(4)], DieOnce(str(flags))))
    res = run_workflow([stage], out=tmp_path / "out", fingerprint="f", executor=RayExecutor(workers=2))
    assert (flags / "died-1").exists()  # it did die once
    assert sum(r.stats.kept for r in res["die"]) == 4
    assert [(tmp_path / "out" / f"unit-{i:06d}.txt").read_text() for i in range(4)] == [f"unit {i}\n" for i in range(4)]
    assert len(list(flags.glob("setup-*"))) >= 3  # once per actor process, and again after the restart


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
    while time.monotonic() < deadline and not (done.is_dir() and len(list(done.iterdir())) >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 2 <= len(list(done.iterdir())) < 12
    assert subprocess.run([sys.executable, str(script), str(out), cluster], env=env).returncode == 0
    assert subprocess.run([sys.executable, str(script), str(tmp_path / "clean"), cluster], env=env).returncode == 0
    assert _tree(out) == _tree(tmp_path / "clean")
    assert json.loads((out / "unit-000003.json").read_text()) == list(range(15))
