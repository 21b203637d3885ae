"""Many tiny units through the local pool: every unit commits (no staging race between workers), results come
back in unit order, and a resume redoes exactly the units whose marker is missing."""

from __future__ import annotations

import os
from pathlib import Path

import statekit
from tokenmill.base.accounting import Stats
from tokenmill.engine import LocalExecutor, Stage, StagePlan, Unit, UnitResult, run_workflow
from tokenmill.engine.local import IN_FLIGHT


def _noop(unit: Unit, staging: Path) -> UnitResult:
    return UnitResult(stats=Stats(input=1, kept=1), data={"index": unit.index, "pid": os.getpid()})


def _stages(n: int) -> list[Stage]:
    units = [Unit(i, f"{i:05d}") for i in range(n)]
    return [Stage("noop", 1, lambda ctx: StagePlan(units, _noop))]


def _run(out: Path, n: int) -> list[UnitResult]:
    with LocalExecutor(workers=2) as ex:
        return run_workflow(_stages(n), out=out, fingerprint="many", executor=ex)["noop"]


def test_thousands_of_units_all_commit_in_order(tmp_path):
    n = 3000  # well past the submission window, and enough commits for two workers to race on the staging root
    assert n > 20 * IN_FLIGHT * 2
    results = _run(tmp_path / "out", n)
    assert [r.data["index"] for r in results] == list(range(n))
    assert len({r.data["pid"] for r in results}) == 2  # both workers had work
    assert statekit.committed(tmp_path / "out", "noop_v1") == [f"{i:05d}" for i in range(n)]
    assert sorted(os.listdir(tmp_path / "out" / "_state" / "noop_v1")) == ["index.jsonl", "run.json"]  # one file, not n


def test_resume_redoes_only_the_units_without_a_marker(tmp_path):
    out = tmp_path / "out"
    first = _run(out, 400)
    done = statekit.reopen(out, "noop_v1")  # as if killed after the last commit, before the index
    for i in range(0, 400, 7):
        (done / f"{i:05d}.json").unlink()
    again = _run(out, 400)
    redone = [i for i, (a, b) in enumerate(zip(first, again)) if a.data["pid"] != b.data["pid"]]
    assert redone == list(range(0, 400, 7))
