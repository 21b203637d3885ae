"""15.3: one damaged element or row group loses only itself; the rest is read and the loss is counted."""

from __future__ import annotations

import json

import hostilekit as hk
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.io import expand_inputs, plan_units, read_unit


def _read(path):
    rows, rejects = [], []
    for unit in plan_units(expand_inputs([str(path)])):
        for batch in read_unit(unit):
            rows += batch.to_rows()
            rejects += batch.rejects
    return rows, rejects


def test_json_array_recovers_at_the_next_element(tmp_path):
    items = [json.dumps({"id": i, "text": f"t{i}"}) for i in range(20)]
    items[5] = '{"id": 5, "text": "broken" "here"}'
    items[11] = '{"id": 11, "text": [1, 2}'  # a mismatched bracket
    path = tmp_path / "arr.json"
    path.write_text("[\n" + ",\n".join(items) + "\n]")
    rows, rejects = _read(path)
    assert [r["id"] for r in rows] == [i for i in range(20) if i not in (5, 11)]
    assert [(r.loc, r.reason) for r in rejects] == [(6, "malformed_json"), (12, "malformed_json")]


def test_json_array_unterminated_string_resyncs_at_the_line(tmp_path):
    lines = [json.dumps({"id": i, "text": f"t{i}"}) for i in range(10)]
    lines[3] = '{"id": 3, "text": "no closing quote}'
    path = tmp_path / "arr.json"
    path.write_text("[\n" + ",\n".join(lines) + "\n]")
    rows, rejects = _read(path)
    assert [r["id"] for r in rows] == [i for i in range(10) if i != 3]
    assert [r.loc for r in rejects] == [4]


def test_json_array_cut_short_counts_the_last_element(tmp_path):
    path = tmp_path / "arr.json"
    path.write_text(json.dumps([{"id": i, "text": "x" * 50} for i in range(10)])[:-30])
    rows, rejects = _read(path)
    assert len(rows) == 9
    assert [(r.loc, r.reason) for r in rejects] == [(10, "unreadable")]


def test_json_array_input_is_fully_counted_through_the_track(tmp_path):
    items = [json.dumps({"id": f"d{i}", "text": f"text {i} " * 5}) for i in range(30)]
    items[2] = "{oops"
    path = tmp_path / "in" / "arr.json"
    path.parent.mkdir()
    path.write_text("[" + ",".join(items) + "]")
    counts = hk.pretrain([path], tmp_path / "out")["counts"]
    assert counts["input"] == 30 and counts["kept"] == 29 and counts["rejected"] == {"malformed_json": 1}


def _damaged_parquet(path, *, groups=5, rows=40, bad=2):
    table = pa.table({"id": [f"r{i}" for i in range(groups * rows)],
                      "text": [f"row number {i} " * 8 for i in range(groups * rows)]})
    pq.write_table(table, path, row_group_size=rows, compression="none")
    meta = pq.ParquetFile(path).metadata.row_group(bad).column(1)
    data = bytearray(path.read_bytes())
    at = meta.data_page_offset
    data[at:at + 24] = b"\xff" * 24  # the page header of the text column of one group
    path.write_bytes(bytes(data))


def test_one_damaged_parquet_row_group_costs_only_its_rows(tmp_path):
    path = tmp_path / "in" / "t.parquet"
    path.parent.mkdir()
    _damaged_parquet(path)
    rows, rejects = _read(path)
    assert len(rows) == 160
    assert len(rejects) == 40 and {r.reason for r in rejects} == {"unreadable"}
    assert [r.loc for r in rejects] == list(range(81, 121))
    assert "row group 2" in rejects[0].detail


def test_damaged_parquet_through_the_track_keeps_the_identity(tmp_path):
    path = tmp_path / "in" / "t.parquet"
    path.parent.mkdir()
    _damaged_parquet(path)
    counts = hk.pretrain([path], tmp_path / "out", unit_bytes=1 << 30)["counts"]  # one unit for all groups
    assert counts["input"] == 200 and counts["kept"] == 160 and counts["rejected"] == {"unreadable": 40}
