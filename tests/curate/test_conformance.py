"""Every conformance vector shipped in the package holds for tokenmill's steps."""

from __future__ import annotations

import collections
import json
import math

import pytest

from tokenmill.curate.conformance import score_case, score_cases, vectors

VECTORS = list(vectors())


def test_vectors_ship_with_the_package_and_cover_every_rule():
    by_rule = collections.Counter((v["step"], v["rule"]) for v in VECTORS)
    steps = {v["step"] for v in VECTORS}
    assert steps == {"length", "gopher_quality", "gopher_repetition", "c4", "fineweb", "refinedweb"}
    assert min(by_rule.values()) >= 10, [k for k, n in by_rule.items() if n < 10]
    rules_seen = {(v["step"], r) for v in VECTORS for r, fired in v["rules"].items() if fired}
    every_rule = {(v["step"], r) for v in VECTORS for r in v["rules"]}
    assert every_rule - rules_seen <= set(), sorted(every_rule - rules_seen)  # each rule fires somewhere
    assert any(v["text"] is None for v in VECTORS) and any(v["text"] == "" for v in VECTORS)


def _groups():
    groups = collections.defaultdict(list)
    for v in VECTORS:
        groups[(v["step"], json.dumps(v["params"], sort_keys=True))].append(v)
    return groups


GROUPS = _groups()


@pytest.mark.parametrize("key", list(GROUPS), ids=[f"{s}:{p}" for s, p in GROUPS])
def test_vectors_scored_as_one_batch(key):
    group = GROUPS[key]
    got = score_cases(key[0], json.loads(key[1]), [v["text"] for v in group])
    for vector, row in zip(group, got):
        _check(vector, row)


def test_one_document_batches_agree():
    for vector in VECTORS[::25]:
        _check(vector, score_case(vector["step"], vector["params"], vector["text"]))


def _check(vector, got):
    where = f"{vector['id']} ({vector['note']})"
    assert got["decision"] == vector["decision"], where
    assert got["rules"] == vector["rules"], where
    assert got["scores"].keys() == vector["scores"].keys(), where
    for name, want in vector["scores"].items():
        assert math.isclose(got["scores"][name], want, rel_tol=1e-9, abs_tol=1e-9), (where, name)
    assert got.get("text_after") == vector.get("text_after"), where
