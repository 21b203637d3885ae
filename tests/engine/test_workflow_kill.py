"""A three-stage workflow (map -> corpus-wide group -> map) killed with SIGKILL in each of its stages in
turn, resumed each time, ends with the same bytes as a run never interrupted; and killed at each point of a
stage's end (its index written, its markers and its dropped intermediates removed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import killkit
import pytest

import statekit

HERE = Path(__file__).resolve().parent
STAGES = ("emit_v1", "group_v1", "apply_v1")
TOTAL = {"emit_v1": killkit.PARTS, "group_v1": killkit.PARTITIONS, "apply_v1": killkit.PARTS}


def start(out: Path, workers: int, sleep: float, die_at: str = "") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    code = f"import killkit; killkit.main({str(out)!r}, {workers}, {sleep}, {die_at!r})"
    return subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def done(out: Path, stage: str) -> int:
    return len(statekit.committed(out, stage))


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_state" not in p.parts}


def kill_in(out: Path, stage: str, workers: int) -> None:
    """Run until ``stage`` has committed a unit, SIGKILL the run, check it died inside that stage."""
    proc = start(out, workers, sleep=0.25)
    try:
        deadline = time.monotonic() + 90
        while done(out, stage) == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, f"the run ended before it could be killed in {stage}: {proc.stderr.read()}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # workers notice on their own; do not leave any behind
        except ProcessLookupError:
            pass
        proc.stderr.close()
    i = STAGES.index(stage)
    assert 0 < done(out, stage) < TOTAL[stage], f"killed after {stage} had finished"
    assert all(done(out, s) == TOTAL[s] for s in STAGES[:i])
    assert all(done(out, s) == 0 for s in STAGES[i + 1:])


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("ref") / "out"
    killkit.main(str(out), 1, 0.0)
    files = tree(out)
    assert sorted(files) == [f"final-{i}.txt" for i in range(killkit.PARTS)]  # the intermediates dropped
    return files


@pytest.mark.parametrize("workers", [1, 2])
def test_killed_in_every_stage_resumes_to_the_same_bytes(tmp_path, reference, workers):
    out = tmp_path / "out"
    for stage in STAGES:
        kill_in(out, stage, workers)
    proc = start(out, workers, sleep=0.0)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert tree(out) == reference
    assert all(done(out, s) == TOTAL[s] for s in STAGES)


def leftovers(out: Path) -> list[str]:
    """What an ended run should not hold: markers, staging, temporary files, dropped intermediates."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")
                  if p.name in ("done", "tmp", "_work") or p.name.endswith(".tmp"))


@pytest.mark.parametrize("die_at", killkit.DEATHS)
def test_killed_while_a_stage_ends_resumes_to_the_same_bytes(tmp_path, reference, die_at):
    out = tmp_path / "out"
    proc = start(out, 1, 0.0, die_at)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err.decode()
    assert done(out, "group_v1") == TOTAL["group_v1"] and done(out, "apply_v1") == 0  # died in group's end
    index = out / "_state" / "group_v1" / "index.jsonl"
    written = index.read_bytes() if index.exists() else None
    assert (written is not None) == (die_at != "index-torn")
    proc = start(out, 1, 0.0)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert tree(out) == reference and leftovers(out) == []
    assert all(done(out, s) == TOTAL[s] for s in STAGES)
    if written is not None:
        assert index.read_bytes() == written  # an index once renamed in is the stage: no unit of it ran again
