"""The local executor: atomic commits, skip-on-resume, same bytes with 1 or N workers, setup once per worker,
no pool for one unit, one pool for every stage when held."""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest

from tokenmill.base.accounting import Stats
from tokenmill.engine import LocalExecutor, Stage, StagePlan, StageState, Unit, UnitResult, run_workflow
from tokenmill.errors import ConfigError


@dataclass
class WriteSquares:
    """A tiny real task: writes one file per unit and reports counts, the pid that ran it and its setups."""

    calls_log: str | None = None
    setups: int = 0

    def setup(self) -> None:
        self.setups += 1

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        if self.calls_log:
            with open(self.calls_log, "a") as fh:
                fh.write(f"{unit.index}\n")
        (staging / "parts").mkdir()
        (staging / "parts" / f"{unit.name}.txt").write_text(f"{unit.index ** 2}\n")
        return UnitResult(stats=Stats(input=1, kept=1, bytes_in=10), outputs=[f"parts/{unit.name}.txt"],
                          data={"value": unit.index ** 2, "pid": os.getpid(), "setups": self.setups})


def _stage(n: int, task=None, name: str = "squares") -> Stage:
    units = [Unit(i, f"unit-{i:06d}", size=10) for i in range(n)]
    return Stage(name, 1, lambda ctx: StagePlan(units, task or WriteSquares()))


def _run(out: Path, n: int, *, workers: int = 1, task=None, fingerprint: str = "a", **kw) -> list[UnitResult]:
    ex = LocalExecutor(workers=workers)
    res = run_workflow([_stage(n, task)], out=out, fingerprint=fingerprint, executor=ex, **kw)
    return res["squares"]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_state" not in p.parts}


def test_results_in_unit_order_and_files_committed(tmp_path):
    results = _run(tmp_path, 5)
    assert [r.data["value"] for r in results] == [0, 1, 4, 9, 16]
    assert sorted(_tree(tmp_path)) == [f"parts/unit-{i:06d}.txt" for i in range(5)]
    state = sorted(str(f.relative_to(tmp_path / "_state")) for f in (tmp_path / "_state").rglob("*") if f.is_file())
    assert state == ["lock", "squares_v1/index.jsonl", "squares_v1/run.json", "written.json"]  # no staging, no markers
    assert all(r.peak_rss_mb > 0 and r.seconds >= 0 for r in results)


def test_one_and_two_workers_give_identical_bytes(tmp_path):
    _run(tmp_path / "a", 7, workers=1)
    results = _run(tmp_path / "b", 7, workers=2)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    assert {r.data["pid"] for r in results} - {os.getpid()}, "two workers ran in this process"


def test_setup_runs_once_per_worker_not_per_unit(tmp_path):
    here = _run(tmp_path / "a", 6, workers=1)
    assert [r.data["setups"] for r in here] == [1] * 6
    pooled = _run(tmp_path / "b", 12, workers=2)
    assert {r.data["setups"] for r in pooled} == {1}


def test_one_unit_never_starts_a_pool(tmp_path):
    ex = LocalExecutor(workers=4)
    ex.prepare(1, preload=("json",))
    assert ex._pool is None
    results = run_workflow([_stage(1)], out=tmp_path, fingerprint="a", executor=ex)["squares"]
    assert results[0].data["pid"] == os.getpid()


def test_a_held_executor_prepared_early_serves_every_stage_with_one_pool(tmp_path):
    with LocalExecutor(workers=2) as ex:
        ex.prepare(8, preload=("tokenmill.base.accounting",))
        pool = ex._pool
        assert pool is not None
        res = run_workflow([_stage(4, name="a"), _stage(4, name="b")], out=tmp_path, fingerprint="a", executor=ex)
        assert ex._pool is pool
        pids = {r.data["pid"] for rs in res.values() for r in rs}
    assert ex._pool is None and os.getpid() not in pids and len(pids) <= 2
    # each stage's task is installed (and set up) once per worker, the second stage's too
    assert {r.data["setups"] for r in res["b"]} == {1}


def test_resume_skips_committed_units_and_redoes_torn_ones(tmp_path):
    import statekit  # here, not at the top: the Ray tests import this module's tasks in their workers

    out, log = tmp_path / "out", tmp_path / "calls.txt"
    _run(out, 4)
    state = StageState(out, "squares_v1")
    unit = Unit(2, "unit-000002")
    statekit.reopen(out, "squares_v1")  # as if killed after the stage's last commit, before its index
    state.marker(unit).unlink()  # and unit 2 killed after the rename, before its marker
    (out / "parts" / "unit-000002.txt").write_text("garbage from a killed attempt")
    state.staging(unit).mkdir(parents=True)
    (state.staging(unit) / "half-written").write_text("x")
    results = _run(out, 4, task=WriteSquares(str(log)))
    assert log.read_text().split() == ["2"]
    assert (out / "parts" / "unit-000002.txt").read_text() == "4\n"
    assert [r.data["value"] for r in results] == [0, 1, 4, 9]
    assert statekit.results(out, "squares_v1")["unit-000002"]["data"]["value"] == 4
    assert not state.marker(unit).exists() and statekit.committed(out, "squares_v1") == [f"unit-{i:06d}" for i in range(4)]


def test_resume_with_other_settings_is_refused_and_overwrite_starts_again(tmp_path):
    _run(tmp_path, 2)
    with pytest.raises(ConfigError, match="--overwrite"):
        _run(tmp_path, 2, fingerprint="b")
    (tmp_path / "stray.txt").write_text("not written by tokenmill")
    _run(tmp_path, 2, fingerprint="b", overwrite=True)
    assert (tmp_path / "stray.txt").exists()  # --overwrite removes only what tokenmill wrote


def test_finalize_runs_once_after_the_last_stage(tmp_path):
    seen = []
    run_workflow([_stage(3)], out=tmp_path, fingerprint="a", executor=LocalExecutor(workers=1),
                 finalize=lambda ctx: seen.append(sum(r.stats.kept for r in ctx.results["squares"])))
    assert seen == [3]


def test_task_and_units_pickle():
    task, unit = WriteSquares(), Unit(0, "unit-000000", 10, payload={"any": "thing"})
    assert pickle.loads(pickle.dumps(task)) == task
    assert pickle.loads(pickle.dumps(unit)) == unit


def test_nested_holds_keep_the_pool_until_the_outermost_ends(tmp_path):
    with LocalExecutor(workers=2) as ex:
        with ex:
            run_workflow([_stage(3)], out=tmp_path / "a", fingerprint="a", executor=ex)
            pool = ex._pool
        assert pool is not None and ex._pool is pool
        run_workflow([_stage(3)], out=tmp_path / "b", fingerprint="a", executor=ex)
        assert ex._pool is pool
    assert ex._pool is None


@dataclass(frozen=True)
class Refuse:
    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        raise ConfigError(f"unit {unit.name}: refused")


def test_an_error_raised_in_a_worker_arrives_with_its_message(tmp_path):
    with pytest.raises(ConfigError) as caught:
        run_workflow([_stage(2, Refuse())], out=tmp_path, fingerprint="a", executor=LocalExecutor(workers=2))
    assert caught.value.problems in (["unit unit-000000: refused"], ["unit unit-000001: refused"])


@dataclass
class ReadEnvironment:
    """Reports the value of one environment variable as the worker sees it."""

    name: str

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        return UnitResult(stats=Stats(input=1, kept=1, bytes_in=10), outputs=[],
                          data={"value": os.environ.get(self.name), "pid": os.getpid()})


def test_workers_of_a_later_run_see_the_driver_environment_of_that_run(tmp_path, monkeypatch):
    """The fork server outlives a run and its children inherit its environment; each run's workers must see
    the environment of that run's driver (TOKENMILL_CACHE above all), not the first run's."""
    seen = []
    for k, value in enumerate(["first", "second", None]):
        if value is None:
            monkeypatch.delenv("TOKENMILL_TEST_VALUE", raising=False)
        else:
            monkeypatch.setenv("TOKENMILL_TEST_VALUE", value)
        results = _run(tmp_path / str(k), 4, workers=2, task=ReadEnvironment("TOKENMILL_TEST_VALUE"))
        assert len({r.data["pid"] for r in results} - {os.getpid()}) >= 1  # workers ran them, not this process
        seen.append({r.data["value"] for r in results})
    assert seen == [{"first"}, {"second"}, {None}]


def test_a_pool_takes_the_largest_units_first(tmp_path, monkeypatch):
    """Longest-processing-time first: the pool is handed the units largest first (unknown sizes, 0, last; ties
    in plan order), so no large unit starts when the other workers are about to run out of work."""
    from tokenmill.engine import local

    units = [Unit(0, "a", 10), Unit(1, "b", 0), Unit(2, "c", 30), Unit(3, "d", 10), Unit(4, "e", 0)]
    assert [u.name for u in local.largest_first(units)] == ["c", "a", "d", "b", "e"]
    handed, real = [], local.largest_first
    monkeypatch.setattr(local, "largest_first", lambda us: handed.append([u.index for u in us]) or real(us))
    stage = Stage("squares", 1, lambda ctx: StagePlan(
        [Unit(i, f"unit-{i:06d}", size=s) for i, s in enumerate([1, 5, 3])], WriteSquares()))
    res = run_workflow([stage], out=tmp_path, fingerprint="a", executor=LocalExecutor(workers=2))
    assert handed == [[0, 1, 2]]
    assert [r.data["value"] for r in res["squares"]] == [0, 1, 4]  # results still in unit order


FROZEN_SCRIPT = """
import gc, json, sys
from pathlib import Path
from tokenmill.base.accounting import Stats
from tokenmill.engine import LocalExecutor, Stage, StagePlan, Unit, UnitResult, run_workflow


class Frozen:
    def __call__(self, unit, staging):
        return UnitResult(stats=Stats(input=1, kept=1), data={"frozen": gc.get_freeze_count()})


if __name__ == "__main__":
    stage = Stage("frozen", 1, lambda ctx: StagePlan([Unit(i, f"unit-{i}", size=1) for i in range(4)], Frozen()))
    res = run_workflow([stage], out=Path(sys.argv[1]), fingerprint="a", executor=LocalExecutor(workers=2))
    print(json.dumps([r.data["frozen"] for r in res["frozen"]]))
"""


def test_pool_workers_start_with_what_the_fork_server_holds_frozen(tmp_path):
    """The fork server's last preload freezes what it holds (gc.freeze), so a worker's full collections never
    walk, nor write to, the pages it shares with the server."""
    import json
    import multiprocessing
    import subprocess
    import sys

    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork server on this platform")
    script = tmp_path / "run.py"
    script.write_text(FROZEN_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-2000:]
    frozen = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(frozen) == 4 and min(frozen) > 1000  # what the server imported (nothing was frozen before)
