"""Typed stage outputs: a unit's output is read by field and checked at the stage boundary."""

from __future__ import annotations

import pytest

import statekit
from tokenmill.engine.local import commit_unit
from tokenmill.engine.outputs import Documents, Partitioned, Shards, as_data, output, outputs
from tokenmill.engine.stage import Unit, UnitResult
from tokenmill.engine.workflow import StageState
from tokenmill.errors import StageError
from tokenmill.io.snapshot import CheckedTask


def test_a_documents_output_reads_by_field_with_its_defaults():
    got = output(UnitResult(data={"docs": "documents/unit-000000.parquet", "unit": "unit-000000"}), Documents,
                 stage="curate")
    assert got == Documents(docs="documents/unit-000000.parquet", unit="unit-000000")
    assert got.ledger is None and got.samples == {} and got.cut is None


def test_a_missing_field_names_the_stage_the_unit_and_what_the_output_holds():
    results = [UnitResult(data={"docs": "a.parquet"}), UnitResult(data={"dir": "_work/x/unit-000001"})]
    with pytest.raises(StageError, match=r"stage 'exact_dedup.hash', unit 1: its output has no 'docs' .* it has dir"):
        outputs(results, Documents, stage="exact_dedup.hash")


@pytest.mark.parametrize("data,kind", [({"dir": 3}, Partitioned), ({"dir": "d", "partitions": "4"}, Partitioned),
                                        ({"shards": {"a": 1}}, Shards), ({"docs": "a", "cut": True}, Documents)])
def test_a_field_of_the_wrong_type_is_refused(data, kind):
    with pytest.raises(StageError, match="expected"):
        output(UnitResult(data=data), kind, stage="s", index=0)


def test_other_keys_are_left_to_their_stage():
    got = output(UnitResult(data={"dir": "d", "partitions": 4, "entries": 10}), Partitioned, stage="minhash")
    assert got == Partitioned(dir="d", partitions=4)
    assert output(UnitResult(data={"docs": "a", "cut": 0.25}), Documents, stage="q").cut == 0.25


def test_as_data_writes_what_is_set_and_reads_back_the_same():
    docs = Documents("steps/q/docs/u.parquet", "steps/q/ledger/u.parquet", "u", rows=3, size=120)
    data = as_data(docs, extra=1)
    assert data == {"docs": docs.docs, "ledger": docs.ledger, "unit": "u", "rows": 3, "size": 120, "extra": 1}
    assert output(UnitResult(data=data), Documents, stage="q") == docs
    assert as_data(Partitioned("d")) == {"dir": "d"} and as_data(Shards([])) == {"shards": []}


class _Declares:
    """A task that names its typed output and hands on something else."""

    output = Documents

    def __call__(self, unit, staging):
        return UnitResult(data={"dir": "_work/x"})


def test_the_engine_checks_a_tasks_declared_output_when_the_unit_commits(tmp_path):
    """Before it is recorded as committed: a resume never reads back an output the next stage cannot read."""
    state = StageState(tmp_path, "docs_stage")
    state.prepare("fp")
    unit = Unit(0, "unit-000000")
    with pytest.raises(StageError, match=r"stage 'docs_stage', unit 0: its output has no 'docs'"):
        commit_unit(_Declares(), unit, state)
    assert statekit.committed(tmp_path, "docs_stage") == []
    assert commit_unit(_Fine(), unit, state).data["docs"] == "a.parquet"
    assert statekit.committed(tmp_path, "docs_stage") == ["unit-000000"]
    assert CheckedTask(_Fine(), {}).output is Documents  # a track's input check hands the declaration on


class _Fine(_Declares):
    def __call__(self, unit, staging):
        return UnitResult(data={"docs": "a.parquet"})
