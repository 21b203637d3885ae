"""Every consent vector (``consent.jsonl``) against tokenmill's steps, and the file against its cases."""

from __future__ import annotations

import math

import pytest

from tokenmill.curate.conformance import consent

pytest.importorskip("protego")


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> str:
    return consent.write_snapshot(tmp_path_factory.mktemp("snapshot"))


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, abs_tol=1e-9)
    return a == b


def test_every_vector_holds(snapshot):
    rows = list(consent.vectors())
    assert {r["step"] for r in rows} == {"robots", "tdm_optout", "license", "machine_text"}
    for row in rows:
        got = consent.score_doc(row["step"], row["params"], row["doc"], snapshot)
        assert got["decision"] == row["decision"], row["id"]
        assert got["scores"].keys() == row["scores"].keys(), row["id"]
        assert all(_same(got["scores"][k], v) for k, v in row["scores"].items()), (row["id"], got["scores"])


def test_the_file_is_what_the_cases_build(snapshot):
    rows, problems = consent.build(snapshot)
    assert not problems
    assert [(r["id"], r["decision"]) for r in rows] == [(r["id"], r["decision"]) for r in consent.vectors()]
