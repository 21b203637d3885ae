"""Raw batches -> Document batches: the Arrow fast path and the row path give the same documents and rejects."""

from __future__ import annotations

import pyarrow as pa

from tokenmill.io.base import RawBatch
from tokenmill.io.documents import to_documents

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


def _fineweb_rows(n: int) -> list[dict]:
    """Rows shaped like FineWeb's Parquet files: text plus metadata columns."""
    rows = [{"text": f"document {i} about rivers and boats", "id": f"<urn:uuid:{i:08d}>", "dump": "CC-MAIN-2024-10",
             "url": f"https://example.com/{i}", "date": "2024-02-21T10:00:00Z", "file_path": "s3://bucket/part.warc.gz",
             "language": "en", "language_score": 0.5 + i / 100, "token_count": 7 + i} for i in range(n)]
    rows[3]["text"], rows[5]["text"], rows[6]["url"] = None, "  ", None
    return rows


def test_fineweb_shaped_parquet_takes_the_columnar_path(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from tokenmill.io import documents, expand_inputs, read_unit
    from tokenmill.io.base import WorkUnit
    from tokenmill.route import inspect_file

    rows = _fineweb_rows(12)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "fw.parquet")
    file = expand_inputs([str(tmp_path / "fw.parquet")])[0]
    schema = inspect_file(file).schema
    assert schema["meta"] == ["dump", "date", "file_path", "language", "language_score", "token_count"]
    raw = next(iter(read_unit(WorkUnit(index=0, file=file))))
    slow, slow_rej = to_documents(RawBatch(raw.source, raw.locs, rows=rows), schema)

    def no_rows(*_a, **_k):
        raise AssertionError("the per-row path ran")

    monkeypatch.setattr(documents, "_columnar_rows", no_rows)
    fast, fast_rej = to_documents(raw, schema)
    assert fast.to_pylist() == slow.to_pylist() and fast.num_rows == 10
    assert [(r.loc, r.reason, r.raw) for r in fast_rej] == [(r.loc, r.reason, r.raw) for r in slow_rej]
    meta = fast.column("meta")[0].as_py()
    assert meta == '{"dump":"CC-MAIN-2024-10","date":"2024-02-21T10:00:00Z","file_path":"s3://bucket/part.warc.gz",' \
                   '"language":"en","language_score":0.5,"token_count":7}'


def test_a_float_id_column_takes_the_row_path_with_the_same_ids():
    rows = [{"text": "a", "id": 1.5}, {"text": "b", "id": 2.0}]
    (fast, _), (slow, _) = _both(rows, {"text": "text", "id": "id"})
    assert fast.column("id").to_pylist() == slow.column("id").to_pylist() == ["1.5", "2.0"]
