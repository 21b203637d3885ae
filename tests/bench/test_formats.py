"""``tokenmill bench formats`` on a small corpus: every format measured, numbers positive and consistent."""

from __future__ import annotations

import json
import re

import numpy as np

from tokenmill.bench import corpus
from tokenmill.bench.formats import FORMATS, bench_formats
from tokenmill.cli import main

ROW = re.compile(r"^\| (?P<name>[^|]+?) \| (?P<nums>.+) \|$")


def _rows(table: str) -> dict[str, list[float]]:
    rows = {}
    for line in table.splitlines():
        m = ROW.match(line)
        if m and m["name"] not in ("format", "---"):
            rows[m["name"]] = [float(x) for x in m["nums"].split(" | ")]
    return rows


def test_generated_corpus_is_deterministic_and_sized():
    a = corpus.generated_texts(mb=0.5, seed=3)
    assert a == corpus.generated_texts(mb=0.5, seed=3)
    assert a != corpus.generated_texts(mb=0.5, seed=4)
    total = sum(len(t.encode()) for t in a)
    assert 500_000 <= total < 500_000 + 200_000
    lengths = np.array([len(t) for t in a])
    assert lengths.min() >= 50 and np.median(lengths) > 800


def test_resample_reaches_size_deterministically():
    texts = ["short", "a somewhat longer document", "é" * 40]
    out = corpus.resample(texts, mb=0.001, seed=7)
    assert out == corpus.resample(texts, mb=0.001, seed=7)
    assert set(out) <= set(texts)
    assert sum(len(t.encode()) for t in out) >= 1000


def test_bench_formats_generated(tmp_path):
    table = bench_formats([], mb=1.0, workdir=str(tmp_path))
    rows = _rows(table)
    assert set(rows) == {f.name for f in FORMATS}
    for name, (disk, ratio, write_s, scan, rss, first, read) in rows.items():
        assert disk > 0 and ratio > 0 and write_s >= 0 and scan > 0 and first > 0 and read > 0, name
        assert rss >= 0, name
    # compressed formats are smaller than the text they hold; plain ones are not
    assert rows["JSONL.zst (level 3)"][1] < 1 and rows["Parquet (zstd)"][1] < 1
    assert rows["JSONL"][1] >= 1
    assert list(tmp_path.iterdir()) == []  # the work files are removed


def test_bench_formats_reads_inputs_through_tokenmill_io(tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": f"document {i} " * 50}) + "\n" for i in range(40)))
    assert main(["bench", "formats", str(docs), "--mb", "0.2", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "40 documents" in out and "resampled with replacement" in out
    assert set(_rows(out)) == {f.name for f in FORMATS}


def test_inputs_without_documents_are_an_input_error(tmp_path, capsys):
    empty = tmp_path / "labels.jsonl"
    empty.write_text('{"text": "   "}\n{"text": ""}\n')
    assert main(["bench", "formats", str(empty), "--mb", "0.1", "--workdir", str(tmp_path)]) == 1  # an input error
    assert "no documents to benchmark" in capsys.readouterr().err
