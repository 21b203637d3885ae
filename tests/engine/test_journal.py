"""The commit journal (``engine/journal.py``): a stage's units are recorded in one append-only file per worker
process, not one marker per unit; a line torn by a kill is a unit to redo; markers are still read."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import statekit
from tokenmill.engine import LocalExecutor, UnitResult, journal
from tokenmill.engine.local import commit_unit
from tokenmill.engine.stage import Unit
from tokenmill.engine.workflow import StageState


@dataclass(frozen=True)
class Write:
    """Writes one small file per unit."""

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        (staging / "parts").mkdir()
        (staging / "parts" / f"{unit.name}.txt").write_text(unit.name)
        return UnitResult(outputs=[f"parts/{unit.name}.txt"], data={"n": unit.index})


def _units(n: int) -> list[Unit]:
    return [Unit(i, f"unit-{i:04d}") for i in range(n)]


def _committed_here(out: Path, n: int) -> StageState:
    """A stage whose first ``n`` units this process committed, its journal closed."""
    state = StageState(out, "write_v1")
    state.prepare("fp")
    for unit in _units(n):
        commit_unit(Write(), unit, state)
    journal.close()
    return state


def test_a_process_records_every_unit_in_one_file(tmp_path):
    state = _committed_here(tmp_path, 40)
    files = os.listdir(state.root / "done")
    assert len(files) == 1 and files[0].endswith(".jsonl")  # one file, not 40 markers
    done = state.committed(_units(40))
    assert sorted(done) == list(range(40)) and done[7].data == {"n": 7}


def test_a_pool_writes_one_journal_per_worker(tmp_path):
    state = StageState(tmp_path, "write_v1")
    state.prepare("fp")
    with LocalExecutor(workers=2) as executor:
        results = executor.run(Write(), _units(30), state)
    assert sorted(results) == list(range(30))
    assert 1 <= len(os.listdir(state.root / "done")) <= 2
    assert sorted(state.committed(_units(30))) == list(range(30))
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == [f"unit-{i:04d}.txt" for i in range(30)]


def test_a_line_torn_by_a_kill_is_a_unit_to_redo(tmp_path):
    state = _committed_here(tmp_path, 3)
    (path,) = (state.root / "done").iterdir()
    line = json.dumps({"unit": "unit-0003", "result": UnitResult(data={"n": 3}).to_dict()}).encode()
    with open(path, "ab") as fh:
        fh.write(line[: len(line) // 2])  # the write a kill -9 cut short
    assert sorted(state.committed(_units(5))) == [0, 1, 2]
    with open(path, "ab") as fh:
        fh.write(line[len(line) // 2:])  # the whole line, without its newline: still not committed
    assert sorted(state.committed(_units(5))) == [0, 1, 2]
    again = StageState(tmp_path, "write_v1")  # the next run: its own file, never the torn one
    commit_unit(Write(), _units(4)[3], again)
    journal.close()
    assert len(os.listdir(state.root / "done")) == 2
    assert sorted(again.committed(_units(5))) == [0, 1, 2, 3]


def test_markers_of_an_object_store_resume_are_read_beside_journals(tmp_path):
    state = _committed_here(tmp_path, 1)
    marker = json.dumps(UnitResult(data={"n": 1}).to_dict())
    (state.root / "done" / "unit-0001.json").write_text(marker)  # a marker key, downloaded
    (state.root / "done" / "unit-0002.json").write_text('{"data": ')  # torn: redone
    assert sorted(state.committed(_units(3))) == [0, 1]
    assert statekit.committed(tmp_path, "write_v1") == ["unit-0000", "unit-0001"]


def test_an_ended_stage_keeps_its_index_and_no_journal(tmp_path):
    state = StageState(tmp_path, "write_v1")
    state.prepare("fp")
    units = _units(5)
    results = {u.index: commit_unit(Write(), u, state) for u in units}
    state.end(units, results)
    assert sorted(p.name for p in state.root.iterdir()) == ["index.jsonl", "run.json"]
    assert sorted(StageState(tmp_path, "write_v1").committed(units)) == list(range(5))
