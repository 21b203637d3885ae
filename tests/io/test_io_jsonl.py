import gzip
import itertools
import json

import orjson
import pytest
import zstandard
from io_helpers import read_all

from tokenmill.io import detect_format, expand_inputs, plan_units, read_unit, sample_records

BAD_JSONL = b"".join(
    [
        b'{"text": "one"}\n',  # 1
        b"\n",  # 2 blank: not a record
        b'{"text": "two", "n": 2}\r\n',  # 3 CRLF is fine
        b"{not json}\n",  # 4
        b'{"text": "\xff\xfe bad"}\n',  # 5
        b"[1, 2, 3]\n",  # 6
        b"   \n",  # 7 blank
        b'"just a string"\n',  # 8
        b'{"text": "last, no newline"}',  # 9
    ]
)


def _jsonl(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return expand_inputs([str(p)])


def test_jsonl_rows_locs_and_rejects(tmp_path):
    files = _jsonl(tmp_path, "bad.jsonl", BAD_JSONL)
    rows, locs, rejects, _, nbytes = read_all(plan_units(files))
    assert rows == [{"text": "one"}, {"text": "two", "n": 2}, {"text": "last, no newline"}]
    assert locs == [1, 3, 9]
    assert [(r.loc, r.reason) for r in rejects] == [
        (4, "malformed_json"),
        (5, "invalid_utf8"),
        (6, "not_an_object"),
        (8, "not_an_object"),
    ]
    assert rejects[0].raw == b"{not json}"
    assert rejects[1].raw == b'{"text": "\xff\xfe bad"}'
    assert all(r.source == "bad.jsonl" and r.detail for r in rejects)
    assert nbytes == len(BAD_JSONL)


def test_bom_on_first_line_is_ignored(tmp_path):
    files = _jsonl(tmp_path, "bom.jsonl", b'\xef\xbb\xbf{"a": 1}\n{"a": 2}\n')
    rows, locs, rejects, _, _ = read_all(plan_units(files))
    assert rows == [{"a": 1}, {"a": 2}] and locs == [1, 2] and not rejects


def _lines(n):
    # varied lengths, some blank and some bad lines, so ranges fall in many places
    out = []
    for i in range(n):
        if i % 17 == 5:
            out.append(b"\n")
        elif i % 23 == 7:
            out.append(b"{broken\n")
        else:
            out.append(orjson.dumps({"i": i, "text": "x" * (i * 7 % 90)}) + b"\n")
    return out


@pytest.mark.parametrize("unit_bytes", [1, 100, 333, 4096, 1 << 30])
def test_byte_range_split_equals_whole_read(tmp_path, unit_bytes):
    lines = _lines(300)
    files = _jsonl(tmp_path, "many.jsonl", b"".join(lines))
    whole = read_all(plan_units(files, unit_bytes=1 << 40))
    units = plan_units(files, unit_bytes=unit_bytes)
    split = read_all(units, batch_rows=7)
    assert split[0] == whole[0] and split[1] == whole[1]
    assert [(r.loc, r.reason) for r in split[2]] == [(r.loc, r.reason) for r in whole[2]]
    assert split[4] == whole[4] == files[0].size
    # oracle: the line number of each row is where its "i" sits in the file
    assert split[1] == [row["i"] + 1 for row in split[0]]
    # each unit starts at a line start, with the right first line number, and ranges tile the file
    data = b"".join(lines)
    assert [u.index for u in units] == list(range(len(units)))
    assert units[0].start == 0 and units[-1].stop == len(data)
    for a, b in itertools.pairwise(units):
        assert a.stop == b.start and data[b.start - 1 : b.start] == b"\n"
        assert b.first_loc == data[: b.start].count(b"\n") + 1
    if unit_bytes == 100:
        assert len(units) > 20


def test_plan_is_deterministic(tmp_path):
    files = _jsonl(tmp_path, "d.jsonl", b"".join(_lines(200)))
    assert plan_units(files, unit_bytes=100) == plan_units(files, unit_bytes=100)


@pytest.mark.parametrize("suffix,compress", [(".jsonl.gz", gzip.compress), (".jsonl.zst", zstandard.compress)])
def test_compressed_jsonl(tmp_path, suffix, compress):
    data = b"".join(_lines(120))
    files = _jsonl(tmp_path, "c" + suffix, compress(data))
    plain = _jsonl(tmp_path, "plain.jsonl", data)
    assert files[0].compression == ("gzip" if suffix.endswith("gz") else "zstd")
    units = plan_units(files, unit_bytes=100)
    assert len(units) == 1  # compressed files are not split
    got, want = read_all(units), read_all(plan_units(plain))
    assert got[0] == want[0] and got[1] == want[1]
    assert [(r.loc, r.reason) for r in got[2]] == [(r.loc, r.reason) for r in want[2]]


def test_truncated_gzip_is_a_reject_not_a_traceback(tmp_path):
    data = gzip.compress(b"".join(orjson.dumps({"i": i, "pad": "y" * 50}) + b"\n" for i in range(2000)))
    files = _jsonl(tmp_path, "cut.jsonl.gz", data[: len(data) // 2])
    rows, locs, rejects, _, _ = read_all(plan_units(files))
    assert rows and locs == list(range(1, len(rows) + 1))
    assert [r.reason for r in rejects] == ["unreadable"]
    # sampling reads only the head, so it never meets the damage
    srows, slocs, srejects = sample_records(files[0], n=5)
    assert [r["i"] for r in srows] == [0, 1, 2, 3, 4] and slocs == [1, 2, 3, 4, 5] and not srejects


def test_json_array_streams_elements(tmp_path):
    items = [{"a": i} for i in range(10)] + [5, {"b": "c"}]
    p = tmp_path / "arr.json"
    p.write_text(json.dumps(items, indent=2))
    files = expand_inputs([str(p)])
    assert files[0].format == "json"
    rows, locs, rejects, _, _ = read_all(plan_units(files), batch_rows=3)
    assert rows == [x for x in items if isinstance(x, dict)]
    assert locs == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12]
    assert [(r.loc, r.reason, r.raw) for r in rejects] == [(11, "not_an_object", 5)]


def test_malformed_json_array_element_loses_only_itself(tmp_path):
    p = tmp_path / "broken.json"
    p.write_bytes(b'[{"a": 1}, {"a": 2}, {"a": oops}, {"a": 4}]')
    rows, locs, rejects, _, _ = read_all(plan_units(expand_inputs([str(p)])))
    assert rows == [{"a": 1}, {"a": 2}, {"a": 4}] and locs == [1, 2, 4]
    assert [(r.loc, r.reason) for r in rejects] == [(3, "malformed_json")]


def test_json_gz_holding_jsonl_and_single_object_json(tmp_path):
    (tmp_path / "docs.json.gz").write_bytes(gzip.compress(b'{"t": 1}\n{"t": 2}\n'))
    assert detect_format(str(tmp_path / "docs.json.gz")) == ("jsonl", "gzip")
    (tmp_path / "one.json").write_text('{\n  "t": [1, 2]\n}\n')
    assert detect_format(str(tmp_path / "one.json")) == ("json", "")
    files = expand_inputs([str(tmp_path)])
    rows, locs, rejects, _, _ = read_all(plan_units(files))
    assert rows == [{"t": 1}, {"t": 2}, {"t": [1, 2]}] and locs == [1, 2, 1] and not rejects


def test_columns_projection_on_rows(tmp_path):
    files = _jsonl(tmp_path, "p.jsonl", b'{"a": 1, "b": 2}\n{"b": 3}\n')
    batches = list(read_unit(plan_units(files)[0], columns=["a"]))
    assert batches[0].rows == [{"a": 1}, {}]


ARRAYS = {
    "objects": json.dumps([{"a": i, "s": 'q"\\[{', "n": [1, {"x": None}]} for i in range(40)], indent=1).encode(),
    "mixed": b'[{"a": 1}, 5, "str", null, [1], {"b": "\\\\"}, {"c": "\\u00e9 \xc3\xa9"}]',
    "too_deep": b'[{"a": 1}, ' + b"[" * 200 + b"]" * 200 + b', {"a": 3}]',
    "deep_in_strings": b'[{"a": "' + b"[" * 300 + b'"}]',
    "damaged": b'[{"a": 1}, {"a": oops}, {"a": 3},]',
    "bad_utf8": b'[{"a": 1}, {"a": "\xff"}, {"a": 3}]',
    "empty": b"[]",
    "big_int": b'[{"a": 1}, {"a": 123456789012345678901234567890}]',
    "trailing": b'[{"a": 1}]  \n garbage',
    "unterminated": b'[{"a": 1}, {"a": 2',
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("compress", [False, True])
def test_a_json_array_parsed_whole_reads_as_the_element_scan_does(tmp_path, monkeypatch, name, compress):
    """An array small enough is parsed in one call; whatever it holds (damage, too deep, invalid UTF-8, not an
    object), the rows, locs and rejects are those of the element-by-element scan."""
    from tokenmill.io import jsonfmt

    p = tmp_path / ("arr.json.gz" if compress else "arr.json")
    p.write_bytes(gzip.compress(ARRAYS[name]) if compress else ARRAYS[name])
    parsed_whole = []
    real = jsonfmt._whole_array
    monkeypatch.setattr(jsonfmt, "_whole_array", lambda body: parsed_whole.append(1) or real(body))
    whole = read_all(plan_units(expand_inputs([str(p)])), batch_rows=7)
    monkeypatch.setattr(jsonfmt, "WHOLE_ARRAY_BYTES", 0)  # every array scanned
    scanned = read_all(plan_units(expand_inputs([str(p)])), batch_rows=7)
    assert parsed_whole == [1]
    assert whole[:2] == scanned[:2] and whole[4] == scanned[4]
    assert [(r.loc, r.reason, r.detail, r.raw) for r in whole[2]] == [
        (r.loc, r.reason, r.detail, r.raw) for r in scanned[2]]


def test_a_truncated_compressed_json_array_keeps_what_came_before_the_damage(tmp_path, monkeypatch):
    from tokenmill.io import jsonfmt

    data = gzip.compress(json.dumps([{"i": i, "pad": "y" * 50} for i in range(3000)]).encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    got = read_all(plan_units(expand_inputs([str(p)])))
    monkeypatch.setattr(jsonfmt, "WHOLE_ARRAY_BYTES", 0)
    want = read_all(plan_units(expand_inputs([str(p)])))
    assert got[0] and got[:2] == want[:2]
    assert [r.reason for r in got[2]] == [r.reason for r in want[2]] == ["unreadable"]


def test_nesting_depth_of_json_texts():
    from tokenmill.io.jsonscan import nesting_depth

    assert nesting_depth(b"[]") == 1 and nesting_depth(b"5") == 0 and nesting_depth(b'"[[["') == 0
    assert nesting_depth(b'[{"a": [1, {"b": "]]]}}"}]}]') == 4
    assert nesting_depth(b'["\\\\", ["\\"[", [["x"]]]]') == 4  # an escaped backslash ends before the quote


def test_sampling_a_json_array_scans_its_head_and_never_parses_it_whole(tmp_path, monkeypatch):
    from tokenmill.io import jsonfmt

    p = tmp_path / "arr.json"
    p.write_text(json.dumps([{"i": i} for i in range(5000)]))
    monkeypatch.setattr(jsonfmt, "_whole_array", lambda body: pytest.fail("a sample parsed the whole array"))
    rows, locs, rejects = sample_records(expand_inputs([str(p)])[0], n=5)
    assert rows == [{"i": i} for i in range(5)] and locs == [1, 2, 3, 4, 5] and not rejects
