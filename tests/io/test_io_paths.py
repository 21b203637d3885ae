import gzip

import fsspec
import pytest
from io_helpers import read_all

from tokenmill.errors import InputError
from tokenmill.io import detect_format, expand_inputs, plan_units


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "corpus"
    for rel, data in {
        "b.jsonl": b'{"t": "b"}\n',
        "a/x.jsonl": b'{"t": "ax"}\n',
        "a/deep/y.txt": b"why\n",
        "a/z.parquet.tmp": b"",  # not listed when hidden below
        ".hidden/h.jsonl": b"{}\n",
        "a/.secret.jsonl": b"{}\n",
        "_tokenmill/out.jsonl": b"{}\n",
        "a/_SUCCESS": b"",
    }.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "a/z.parquet.tmp").unlink()
    return root


def test_directory_is_recursive_sorted_and_skips_hidden(tree):
    files = expand_inputs([str(tree)])
    assert [f.rel for f in files] == ["a/deep/y.txt", "a/x.jsonl", "b.jsonl"]
    assert [f.format for f in files] == ["text", "jsonl", "jsonl"]
    assert files[1].path == str(tree / "a/x.jsonl") and files[1].size == len(b'{"t": "ax"}\n')


def test_glob_rel_is_below_the_non_glob_prefix(tree):
    files = expand_inputs([str(tree / "**" / "*.jsonl")])
    assert [f.rel for f in files] == ["a/x.jsonl", "b.jsonl"]
    files = expand_inputs([str(tree / "a" / "*")])
    assert [f.rel for f in files] == ["deep/y.txt", "x.jsonl"]


def test_single_file_rel_is_basename_and_duplicates_collapse(tree):
    one = str(tree / "a/x.jsonl")
    files = expand_inputs([one, one, str(tree / "a")])
    assert [(f.rel, f.path) for f in files] == [("x.jsonl", one), ("deep/y.txt", str(tree / "a/deep/y.txt"))]


def test_missing_paths_and_empty_globs_raise_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        expand_inputs([str(tmp_path / "nope.jsonl")])
    with pytest.raises(InputError, match="matches no input files"):
        expand_inputs([str(tmp_path / "*.parquet")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no input files"):
        expand_inputs([str(tmp_path / "empty")])


def test_unknown_format(tmp_path):
    p = tmp_path / "data.bin"
    p.write_bytes(b"\x00\x01\x02 binary")
    with pytest.raises(InputError, match="unknown format"):
        expand_inputs([str(p)])
    q = tmp_path / "README"
    q.write_text("plain words\n")
    with pytest.raises(InputError, match="unknown format"):
        expand_inputs([str(q)])
    assert expand_inputs([str(q)], text_mode="line")[0].format == "text"


def test_detect_format_by_magic_and_sniffing(tmp_path):
    cases = {
        "a.jsonl": b'{"a": 1}\n',
        "b.ndjson.gz": gzip.compress(b'{"a": 1}\n'),
        "c.jsonl.gz": b'{"a": 1}\n',  # named .gz but plain: the magic wins
        "d.json": b'  [{"a": 1}]',
        "e.dat": gzip.compress(b'{"a": 1}\n'),  # unknown name: sniffed after gunzip
        "f.warc.wet.gz": gzip.compress(b"WARC/1.0\r\n"),
        "g.warc": b"WARC/1.0\r\n",
        "h.md": b"# title\n",
    }
    want = {
        "a.jsonl": ("jsonl", ""),
        "b.ndjson.gz": ("jsonl", "gzip"),
        "c.jsonl.gz": ("jsonl", ""),
        "d.json": ("json", ""),
        "e.dat": ("jsonl", "gzip"),
        "f.warc.wet.gz": ("wet", "gzip"),
        "g.warc": ("warc", ""),
        "h.md": ("text", ""),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert detect_format(str(tmp_path / name)) == want[name], name


def test_fsspec_memory_urls():
    fs = fsspec.filesystem("memory")
    fs.pipe("/tmio/in/a.jsonl", b'{"t": 1}\n{"t": 2}\n' * 20)
    fs.pipe("/tmio/in/sub/b.txt.gz", gzip.compress(b"hello\n"))
    fs.pipe("/tmio/in/_skip.jsonl", b"{}\n")
    try:
        files = expand_inputs(["memory://tmio/in"])
        assert [(f.rel, f.format, f.compression) for f in files] == [
            ("a.jsonl", "jsonl", ""),
            ("sub/b.txt.gz", "text", "gzip"),
        ]
        assert files[0].path.startswith("memory://")
        units = plan_units(files, unit_bytes=50)
        assert len(units) > 3
        rows, locs, rejects, _, _ = read_all(units, text_mode="file")
        assert rows == [{"t": 1}, {"t": 2}] * 20 + [{"text": "hello\n"}]
        assert locs == list(range(1, 41)) + [1] and not rejects
        globbed = expand_inputs(["memory://tmio/in/*.jsonl"])
        assert [f.rel for f in globbed] == ["a.jsonl"]
    finally:
        fs.rm("/tmio", recursive=True)


def test_file_url(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"t": 1}\n')
    files = expand_inputs([f"file://{tmp_path}/a.jsonl"])
    assert files[0].rel == "a.jsonl" and read_all(plan_units(files))[0] == [{"t": 1}]
