"""Typed stage outputs: a unit's output is read by field and checked at the stage boundary."""

from __future__ import annotations

import pytest

from tokenmill.engine.outputs import Documents, Partitioned, Shards, output, outputs
from tokenmill.engine.stage import UnitResult
from tokenmill.errors import StageError


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
