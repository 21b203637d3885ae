"""Raw batches -> Document batches: the Arrow fast path and the row path give the same documents and rejects."""

from __future__ import annotations

import pyarrow as pa

from tokenmill.io.base import RawBatch
from tokenmill.pretrain.documents import to_documents

ROWS = [
    {"text": "first document", "id": "a", "url": "https://a"},
    {"text": "   \n ", "id": "b", "url": "https://b"},
    {"text": None, "id": "c", "url": None},
    {"text": "fourth", "id": None, "url": "https://d"},
    {"text": "", "id": "e", "url": None},
    {"text": "sixth, no id", "id": None, "url": None},
]
SCHEMA = {"text": "text", "id": "id", "url": "url"}


def _both(rows, schema):
    locs = list(range(10, 10 + len(rows)))
    table = RawBatch("data/part.parquet", locs, table=pa.RecordBatch.from_pylist(rows))
    plain = RawBatch("data/part.parquet", locs, rows=rows)
    return to_documents(table, schema), to_documents(plain, schema)


def test_columnar_and_row_paths_agree():
    (fast, fast_rej), (slow, slow_rej) = _both(ROWS, SCHEMA)
    assert fast.schema == slow.schema
    assert fast.to_pylist() == slow.to_pylist()
    assert [(r.loc, r.reason) for r in fast_rej] == [(r.loc, r.reason) for r in slow_rej] == [
        (11, "empty_document"), (12, "missing_field"), (14, "empty_document")]
    assert fast.column("id").to_pylist() == ["a", "data/part.parquet:13", "data/part.parquet:15"]
    assert fast_rej[0].raw == ROWS[1]


def test_a_non_string_text_column_takes_the_row_path_and_is_rejected_by_type():
    rows = [{"text": 1}, {"text": 2}]
    (fast, fast_rej), (slow, slow_rej) = _both(rows, {"text": "text"})
    assert fast.num_rows == slow.num_rows == 0
    assert {r.reason for r in fast_rej} == {r.reason for r in slow_rej} == {"wrong_type"}
