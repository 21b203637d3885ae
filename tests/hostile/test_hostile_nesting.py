"""15.7: deep nesting is bounded before parsing: the element is rejected, memory stays flat."""

from __future__ import annotations

import json
import time

import hostilekit as hk

from tokenmill.route import inspect


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_json_array_nested_20000_deep_is_one_reject(tmp_path):
    path = tmp_path / "in" / "deep.json"
    path.parent.mkdir()
    good = [json.dumps({"id": f"d{i}", "text": f"plain text {i} " * 10}) for i in range(5)]
    path.write_text("[" + ",".join([*good[:2], _deep(20_000), *good[2:]]) + "]")
    started = time.monotonic()
    inspect([str(path)])  # routing reads the same element: it must not blow up either
    counts = hk.pretrain([path], tmp_path / "out")["counts"]
    assert counts["input"] == 6 and counts["kept"] == 5 and counts["rejected"] == {"too_deep": 1}
    assert time.monotonic() - started < 30


def test_jsonl_metadata_nested_300_levels_is_rejected_not_fatal(tmp_path):
    path = tmp_path / "in" / "docs.jsonl"
    path.parent.mkdir()
    meta: dict = {}
    node = meta
    for _ in range(300):
        node["x"] = {}
        node = node["x"]
    rows = [{"id": "a", "text": "fine text here"}, {"id": "b", "text": "deep one", "meta": meta},
            {"id": "c", "text": "brackets in a string are not nesting: " + "[{" * 400}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    manifest = hk.pretrain([path], tmp_path / "out")
    assert manifest["counts"]["kept"] == 2 and manifest["counts"]["rejected"] == {"too_deep": 1}
    assert hk.rejects(tmp_path / "out")[0]["loc"] == 2


def test_a_200kb_nested_json_array_routes_under_the_memory_limit(tmp_path):
    """The old element parser's memory grew with the square of the depth (200 KB asked 22 GB)."""
    path = tmp_path / "deep.json"
    path.write_text("[" + json.dumps({"text": "plain words"}) + "," + _deep(100_000) + "]")
    route = inspect([str(path)])[0]
    assert route.records_sampled == 1
