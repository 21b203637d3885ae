"""--exclude, --skip-misrouted, a missing extra reported once, --limit, --dry-run, token counts per source."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
import trackkit as tk

from tokenmill.cli import main

BASE = ["--workers", "1", "--no-progress", "--tokenizer", "default"]


@pytest.fixture
def mixed(tmp_path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    tk.write_docs(d / "web.jsonl", 30, seed=1)
    tk.write_docs(d / "books.jsonl", 20, seed=2)
    tk.write_chats(d / "chats.jsonl", 10)
    with open(d / "prefs.jsonl", "w") as f:
        for i in range(10):
            f.write(json.dumps({"prompt": f"q{i}?", "chosen": "good answer", "rejected": "bad answer"}) + "\n")
    return d


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_other_kinds_refuse_the_run_unless_skipped_and_named(tmp_path, mixed, capsys):
    out = tmp_path / "out"
    assert main(["pretrain", str(mixed), "--out", str(out), *BASE]) == 1
    assert "refusing" in capsys.readouterr().err and not out.exists()
    assert main(["pretrain", str(mixed), "--out", str(out), *BASE, "--skip-misrouted"]) == 0
    printed = capsys.readouterr().out
    m = manifest(out)
    assert {(s["path"], s["kind"]) for s in m["config"]["skipped_inputs"]} == {("chats.jsonl", "sft"),
                                                                              ("prefs.jsonl", "preference")}
    assert "skipped chats.jsonl: sft data" in printed and "skipped prefs.jsonl: preference data" in printed
    assert set(m["sources"]) == {"books.jsonl", "web.jsonl"} and m["counts"]["kept"] == 50


def test_exclude_leaves_inputs_out_and_names_them(tmp_path, mixed, capsys):
    out = tmp_path / "out"
    assert main(["sft", str(mixed), "--out", str(out), *BASE, "--verify", "0", "--exclude", "*.jsonl",
                 "--exclude", "x"]) == 1
    assert "leaves no input" in capsys.readouterr().err
    assert main(["sft", str(mixed), "--out", str(out), *BASE, "--verify", "0", "--exclude", "web*",
                 "--exclude", "books*", "--exclude", "prefs.jsonl"]) == 0
    m = manifest(out)
    assert m["config"]["excluded"] == ["books.jsonl", "prefs.jsonl", "web.jsonl"] and list(m["sources"]) == ["chats.jsonl"]


def test_a_missing_extra_is_reported_once_with_its_install_line(tmp_path, monkeypatch, capsys):
    d = tmp_path / "crawl"
    d.mkdir()
    for name in ("a.warc.gz", "b.warc.gz", "c.warc.gz"):
        (d / name).write_bytes(gzip.compress(b"WARC/1.0\r\nWARC-Type: warcinfo\r\n\r\n"))
    tk.write_docs(d / "docs.jsonl", 5)
    for module in ("fastwarc", "fastwarc.warc"):
        monkeypatch.setitem(sys.modules, module, None)  # as if the warc extra were not installed
    assert main(["pretrain", str(d), "--out", str(tmp_path / "out"), *BASE]) == 1
    err = capsys.readouterr().err
    assert err.count("pip install 'tokenmill[warc]'") == 1 and "3 input(s): a.warc.gz, b.warc.gz, c.warc.gz" in err
    assert "--exclude" in err
    assert main(["pretrain", str(d), "--out", str(tmp_path / "out"), *BASE, "--exclude", "*.warc.gz"]) == 0


def test_limit_reads_the_first_records_of_every_input(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    tk.write_docs(d / "a.jsonl", 300, seed=3, broken_every=4)  # a malformed line after every 4th document
    tk.write_docs(d / "b.jsonl", 5, seed=4)
    out = tmp_path / "out"
    assert main(["pretrain", str(d), "--out", str(out), *BASE, "--limit", "10", "--unit-bytes", "2KB"]) == 0
    m = manifest(out)
    assert m["sources"]["a.jsonl"]["records"] == 10 and m["sources"]["b.jsonl"]["records"] == 5
    assert m["counts"]["input"] == 15 and m["counts"]["balanced"] and m["config"]["limit"] == 10
    from tokenmill import open_shards

    ids = [open_shards(out)[i]["id"] for i in range(m["counts"]["kept"])]
    assert ids[:8] == [f"doc-{i}" for i in range(8)]  # lines 1-10 of a.jsonl: 8 documents, 2 malformed


def test_dry_run_plans_and_writes_nothing(tmp_path, mixed, capsys):
    out = tmp_path / "out"
    assert main(["pretrain", str(mixed), "--out", str(out), *BASE, "--skip-misrouted", "--dry-run",
                 "--unit-bytes", "1KB"]) == 0
    printed = capsys.readouterr().out
    assert not out.exists()
    assert "dry run: `tokenmill pretrain` would process 2 input(s)" in printed and "(nothing written)" in printed
    assert "web.jsonl: jsonl, pretrain (1.00)" in printed and "chats.jsonl: skipped (other kind)" in printed


def test_token_counts_per_source(tmp_path, mixed, capsys):
    out = tmp_path / "out"
    assert main(["pretrain", str(mixed / "web.jsonl"), str(mixed / "books.jsonl"), "--out", str(out), *BASE,
                 "--unit-bytes", "1KB"]) == 0
    printed = capsys.readouterr().out
    m = manifest(out)
    assert sum(s["tokens"] for s in m["sources"].values()) == m["counts"]["tokens"]
    assert m["sources"]["web.jsonl"]["kept"] == 30 and m["sources"]["books.jsonl"]["kept"] == 20
    assert f"web.jsonl: 30 kept of 30 records, {m['sources']['web.jsonl']['tokens']:,} tokens" in printed
