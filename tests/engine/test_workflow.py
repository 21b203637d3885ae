"""Workflows of stages: map -> corpus-wide group -> map, resumed per stage, the same bytes with 1 or 2 workers."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest

import statekit
from tokenmill.base.accounting import Stats
from tokenmill.engine import LocalExecutor, Stage, StagePlan, Unit, UnitResult, run_workflow
from tokenmill.errors import ConfigError


@dataclass(frozen=True)
class Emit:
    """Map: unit i writes the numbers i*10 .. i*10+9 into _work/emit/part-i.json."""

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        nums = list(range(unit.index * 10, unit.index * 10 + 10))
        path = staging / "_work" / "emit" / f"{unit.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nums))
        return UnitResult(stats=Stats(input=10, kept=10), outputs=[f"_work/emit/{unit.name}.json"])


@dataclass(frozen=True)
class Group:
    """Group: partition p collects every number with n % parts == p from all emitted files."""

    parts: int
    sources: tuple[str, ...]
    out: str

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        nums = [n for s in self.sources for n in json.loads((Path(self.out) / s).read_text())
                if n % self.parts == unit.payload]
        (staging / "_work" / "group").mkdir(parents=True)
        (staging / "_work" / "group" / f"{unit.name}.json").write_text(json.dumps(sorted(nums)))
        return UnitResult(data={"n": len(nums)})


@dataclass(frozen=True)
class Sum:
    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        (staging / "sums.txt").write_text(str(unit.payload))
        return UnitResult()


def _stages(n_units: int = 4, parts: int = 3) -> list[Stage]:
    def plan_emit(ctx):
        return StagePlan([Unit(i, f"unit-{i:06d}") for i in range(n_units)], Emit(), {"n": n_units})

    def plan_group(ctx):
        sources = tuple(o for r in ctx.results["emit"] for o in r.outputs)
        return StagePlan([Unit(p, f"part-{p:04d}", payload=p) for p in range(parts)],
                         Group(parts, sources, str(ctx.out)), {"parts": parts})

    def plan_sum(ctx):
        counts = sum(r.data["n"] for r in ctx.results["group"])
        return StagePlan([Unit(0, "sum", payload=counts)], Sum())

    return [Stage("emit", 1, plan_emit), Stage("group", 1, plan_group), Stage("sum", 1, plan_sum)]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_state" not in p.parts}


def test_three_stages_run_in_order_and_sum(tmp_path):
    res = run_workflow(_stages(), out=tmp_path, fingerprint="f", executor=LocalExecutor(workers=1))
    assert [len(res[s]) for s in ("emit", "group", "sum")] == [4, 3, 1]
    assert (tmp_path / "sums.txt").read_text() == "40"
    assert sum((r.stats for r in res["emit"]), Stats()).kept == 40


def test_one_or_two_workers_same_bytes(tmp_path):
    run_workflow(_stages(), out=tmp_path / "a", fingerprint="f", executor=LocalExecutor(workers=1))
    run_workflow(_stages(), out=tmp_path / "b", fingerprint="f", executor=LocalExecutor(workers=2))
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_resume_skips_committed_units_and_refuses_other_settings(tmp_path):
    run_workflow(_stages(), out=tmp_path, fingerprint="f", executor=LocalExecutor(workers=1))
    marker = statekit.reopen(tmp_path, "group_v1") / "part-0001.json"
    marker.unlink()  # as if killed before this unit's marker
    before = _tree(tmp_path)
    run_workflow(_stages(), out=tmp_path, fingerprint="f", executor=LocalExecutor(workers=1))
    assert statekit.committed(tmp_path, "group_v1") == ["part-0000", "part-0001", "part-0002"]
    assert not marker.parent.exists() and _tree(tmp_path) == before
    with pytest.raises(ConfigError, match="group_v1"):
        run_workflow(_stages(parts=4), out=tmp_path, fingerprint="f", executor=LocalExecutor(workers=1))


def test_results_sum_and_round_trip():
    a = UnitResult(stats=Stats(input=2, kept=1), outputs=["x"], peak_rss_mb=5, seconds=1.0)
    b = UnitResult(stats=Stats(input=3, kept=3), outputs=["y"], peak_rss_mb=7, seconds=2.0)
    s = a + b
    assert (s.stats.input, s.outputs, s.peak_rss_mb, s.seconds) == (5, ["x", "y"], 7, 3.0)
    assert UnitResult.from_dict(json.loads(json.dumps(a.to_dict()))).to_dict() == a.to_dict()
    assert pickle.loads(pickle.dumps(Group(2, ("a",), "/tmp"))) == Group(2, ("a",), "/tmp")


def test_a_plan_drops_only_directories_inside_its_output():
    from tokenmill.errors import StageError

    for bad in ("_state/emit_v1", "../elsewhere", "/tmp/x", ""):
        with pytest.raises(StageError, match="inside its output"):
            StagePlan([], Sum(), drop=(bad,))
    assert StagePlan([], Sum(), drop=("_work/emit",)).drop == ("_work/emit",)
