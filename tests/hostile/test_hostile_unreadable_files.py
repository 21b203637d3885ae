"""One empty file, or one truncated Parquet file, in a directory input is a rejected input with its reason;
the run goes on with the rest, in pretrain and curate. Only inputs with nothing readable at all are refused."""

from __future__ import annotations

import json

import hostilekit as hk
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


def _truncated_parquet(path):
    pq.write_table(pa.table({"text": [f"hello world {i}" for i in range(100)]}), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.fixture
def mixed(tmp_path):
    hk.docs(tmp_path / "in" / "a.jsonl", 20)
    (tmp_path / "in" / "empty.jsonl").write_bytes(b"")
    _truncated_parquet(tmp_path / "in" / "cut.parquet")
    return tmp_path / "in"


def test_pretrain_counts_empty_and_truncated_files_as_rejects_and_goes_on(mixed, tmp_path):
    result = hk.cli("pretrain", mixed, "--out", tmp_path / "out", "--workers", "1", "--no-progress",
                    "--tokenizer", "default")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == 20
    found = {(r["source"], r["reason"]) for r in hk.rejects(tmp_path / "out")}
    assert found == {("empty.jsonl", "empty_file"), ("cut.parquet", "unreadable")}


def test_curate_counts_them_too(mixed, tmp_path):
    result = hk.cli("curate", mixed, "--out", tmp_path / "cur", "--preset", "none", "--workers", "1", "--no-progress")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "cur" / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == 20
    assert {r["reason"] for r in hk.rejects(tmp_path / "cur")} == {"empty_file", "unreadable"}


def test_nothing_readable_left_is_refused(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "empty.jsonl").write_bytes(b"")
    _truncated_parquet(tmp_path / "in" / "cut.parquet")
    result = hk.cli("pretrain", tmp_path / "in", "--out", tmp_path / "out", "--no-progress", "--tokenizer", "default")
    assert result.returncode == 1 and "no readable records" in result.stderr and "Traceback" not in result.stderr
