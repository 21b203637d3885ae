"""A run that keeps nothing, or loses more than a small share of its records as unreadable, says so where the
user looks: on stderr, in ``manifest.json``'s ``warnings`` and in the data card. Records its steps filter are the
run's purpose and are not warned of."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenmill.cli import main


def _lines(path: Path, good: int, bad: int) -> str:
    path.write_text("".join(json.dumps({"id": f"g{i}", "text": f"document {i} about rivers and mills"}) + "\n"
                            for i in range(good)) + "".join(json.dumps({"id": f"b{i}", "text": i}) + "\n"
                                                            for i in range(bad)))
    return str(path)


def _pairs(path: Path) -> str:
    path.write_text("".join(json.dumps({"prompt": f"q{i}", "chosen": "same", "rejected": "same"}) + "\n"
                            for i in range(4)) + "not json\n")
    return str(path)


@pytest.mark.parametrize("argv, says", [
    (lambda t: ["pretrain", _lines(t / "a.jsonl", 0, 3), "--tokenizer", "default", "--force"],
     "no record was kept: of 3 read, 3 were rejected (wrong_type 3) and 0 filtered"),
    (lambda t: ["pref", _pairs(t / "p.jsonl"), "--tokenizer", "default"],
     "no record was kept: of 5 read, 5 were rejected (identical_completions 4, malformed_json 1)"),
    (lambda t: ["pretrain", _lines(t / "a.jsonl", 8, 2), "--tokenizer", "default", "--force"],
     "2 of 10 records (20%) were rejected (wrong_type 2) and are not in the output"),
    (lambda t: ["curate", _lines(t / "a.jsonl", 8, 2), "--preset", "none", "--force"],
     "2 of 10 records (20%) were rejected (wrong_type 2) and are not in the output"),
])
def test_a_run_that_lost_its_records_warns_where_the_user_looks(argv, says, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*argv(tmp_path), "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {says}" in err and "rejects.jsonl lists each with its file, line and reason" in err
    assert any(says in w for w in json.loads((out / "manifest.json").read_text())["warnings"])
    assert says in (out / "datacard.md").read_text()


def test_a_few_rejects_are_not_warned_of(tmp_path, capsys):
    out = tmp_path / "out"
    docs = _lines(tmp_path / "a.jsonl", 40, 1)  # 1 of 41 rejected: under 5%
    assert main(["curate", docs, "--preset", "none", "--force", "--out", str(out), "--no-progress"]) == 0
    assert "were rejected" not in capsys.readouterr().err
    assert "warnings" not in json.loads((out / "manifest.json").read_text())
