"""The local engine: atomic commits, skip-on-resume, same bytes with 1 or N workers."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest

from tokenmill.engine import run_units
from tokenmill.engine.local import RunState
from tokenmill.errors import ConfigError
from tokenmill.io.base import InputFile, WorkUnit


@dataclass(frozen=True)
class WriteSquares:
    """A tiny real task: writes one file per unit and reports counts."""

    calls_log: str | None = None

    def __call__(self, unit: WorkUnit, staging: Path) -> dict:
        if self.calls_log:
            with open(self.calls_log, "a") as fh:
                fh.write(f"{unit.index}\n")
        (staging / "parts").mkdir()
        (staging / "parts" / f"{unit.name}.txt").write_text(f"{unit.index ** 2}\n")
        return {"stats": {"input": 1, "bytes_in": 10}, "value": unit.index ** 2}


def _units(n: int) -> list[WorkUnit]:
    f = InputFile(path="/nonexistent", rel="x", format="jsonl", size=10 * n)
    return [WorkUnit(index=i, file=f, start=10 * i, stop=10 * (i + 1)) for i in range(n)]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_state" not in p.parts}


def test_results_in_unit_order_and_files_committed(tmp_path):
    results = run_units(_units(5), WriteSquares(), out=tmp_path, fingerprint="a", workers=1, progress=False)
    assert [r["value"] for r in results] == [0, 1, 4, 9, 16]
    assert sorted(_tree(tmp_path)) == [f"parts/unit-{i:06d}.txt" for i in range(5)]
    assert not any((tmp_path / "_state" / "tmp").iterdir())


def test_one_and_two_workers_give_identical_bytes(tmp_path):
    run_units(_units(7), WriteSquares(), out=tmp_path / "a", fingerprint="a", workers=1, progress=False)
    run_units(_units(7), WriteSquares(), out=tmp_path / "b", fingerprint="a", workers=2, progress=False)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_resume_skips_committed_units_and_redoes_torn_ones(tmp_path):
    out, log = tmp_path / "out", tmp_path / "calls.txt"
    units = _units(4)
    run_units(units, WriteSquares(), out=out, fingerprint="a", workers=1, progress=False)
    state = RunState(out)
    state.marker(units[2]).unlink()  # as if killed after the rename, before the marker
    (out / "parts" / "unit-000002.txt").write_text("garbage from a killed attempt")
    (state.staging(units[2])).mkdir(parents=True)
    (state.staging(units[2]) / "half-written").write_text("x")
    results = run_units(units, WriteSquares(str(log)), out=out, fingerprint="a", workers=1, progress=False)
    assert log.read_text().split() == ["2"]
    assert (out / "parts" / "unit-000002.txt").read_text() == "4\n"
    assert [r["value"] for r in results] == [0, 1, 4, 9]
    assert json.loads(state.marker(units[2]).read_text())["value"] == 4


def test_resume_with_other_settings_is_refused(tmp_path):
    run_units(_units(2), WriteSquares(), out=tmp_path, fingerprint="a", workers=1, progress=False)
    with pytest.raises(ConfigError, match="--overwrite"):
        run_units(_units(2), WriteSquares(), out=tmp_path, fingerprint="b", workers=1, progress=False)
    run_units(_units(2), WriteSquares(), out=tmp_path, fingerprint="b", workers=1, overwrite=True, progress=False)


def test_task_and_units_pickle():
    task, unit = WriteSquares(), _units(1)[0]
    assert pickle.loads(pickle.dumps(task)) == task
    assert pickle.loads(pickle.dumps(unit)) == unit
