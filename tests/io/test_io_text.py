import gzip

import pytest
from io_helpers import read_all

from tokenmill.io import expand_inputs, plan_units

PROSE = "First line.\nSecond line of para one.\n\n\nPara two only line.\n   \nPara three\nends here\n"


def _read(tmp_path, name, data, mode):
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return read_all(plan_units(expand_inputs([str(p)])), text_mode=mode)


def test_file_mode(tmp_path):
    rows, locs, rejects, _, _ = _read(tmp_path, "a.txt", PROSE, "file")
    assert rows == [{"text": PROSE}] and locs == [1] and not rejects


def test_line_mode(tmp_path):
    rows, locs, _, _, _ = _read(tmp_path, "a.txt", PROSE, "line")
    assert [r["text"] for r in rows] == [
        "First line.",
        "Second line of para one.",
        "Para two only line.",
        "Para three",
        "ends here",
    ]
    assert locs == [1, 2, 5, 7, 8]


def test_paragraph_mode(tmp_path):
    rows, locs, _, _, _ = _read(tmp_path, "a.md", PROSE, "paragraph")
    assert [r["text"] for r in rows] == [
        "First line.\nSecond line of para one.",
        "Para two only line.",
        "Para three\nends here",
    ]
    assert locs == [1, 5, 7]


def test_auto_mode_picks_line_for_long_lines_and_file_for_prose(tmp_path):
    long_lines = "".join(f"article {i} " + "word " * 300 + "\n" for i in range(5))
    rows, locs, _, _, _ = _read(tmp_path, "wiki.txt.gz", gzip.compress(long_lines.encode()), "auto")
    assert len(rows) == 5 and locs == [1, 2, 3, 4, 5]
    rows, _, _, _, _ = _read(tmp_path, "book.txt", PROSE, "auto")
    assert rows == [{"text": PROSE}]


def test_invalid_utf8(tmp_path):
    data = b"good line\nbad \xff line\nanother good\n"
    rows, locs, rejects, _, _ = _read(tmp_path, "b.txt", data, "line")
    assert [r["text"] for r in rows] == ["good line", "another good"] and locs == [1, 3]
    assert [(r.loc, r.reason, r.raw) for r in rejects] == [(2, "invalid_utf8", b"bad \xff line")]
    rows, _, rejects, _, _ = _read(tmp_path, "b.txt", data, "file")
    assert rows == [] and [(r.loc, r.reason) for r in rejects] == [(1, "invalid_utf8")]


def test_bad_text_mode_is_a_config_error(tmp_path):
    from tokenmill.errors import ConfigError

    with pytest.raises(ConfigError, match="text_mode"):
        _read(tmp_path, "a.txt", PROSE, "sentences")
