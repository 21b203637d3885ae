"""``tokenmill synth`` takes the job flags every command takes (declared once, in ``JobOptions``): a dry run
writes nothing, asks no server and prints the plan; ``--exclude`` leaves inputs out; the flags a synth run cannot
use are refused with the reason. (``--limit`` against a real server: test_synth_server.py.)"""

from __future__ import annotations

import json

import pytest

from tokenmill.cli import main

NO_SERVER = "http://127.0.0.1:9"  # nothing listens there: a run that asked it would fail


def _docs(tmp_path, name="web.jsonl", n=3):
    f = tmp_path / name
    f.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Page {i} about rivers. " * 20}) + "\n" for i in range(n)))
    return f


@pytest.mark.parametrize("kind", ["rephrase", "distill"])
def test_dry_run_writes_nothing_asks_no_server_and_prints_the_plan(kind, tmp_path, capsys):
    docs = _docs(tmp_path)
    out = tmp_path / "out"
    assert main(["synth", kind, str(docs), "--server", NO_SERVER, "--model", "m", "--out", str(out), "--dry-run",
                 "--limit", "2"]) == 0
    printed = capsys.readouterr().out
    assert f"dry run: `tokenmill synth {kind}` would process 1 input(s)" in printed
    assert "limit: the first 2 records of every input" in printed
    assert not out.exists()


def test_exclude_leaves_inputs_out(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    _docs(tmp_path / "in", "web.jsonl")
    _docs(tmp_path / "in", "skip-me.jsonl")
    assert main(["synth", "rephrase", str(tmp_path / "in"), "--server", NO_SERVER, "--model", "m", "--out",
                 str(tmp_path / "out"), "--dry-run", "--exclude", "skip-*"]) == 0
    printed = capsys.readouterr().out
    assert "would process 1 input(s)" in printed and "skip-me.jsonl: excluded" in printed


@pytest.mark.parametrize("flag, why", [(["--workers", "4"], "--concurrency requests in flight"),
                                       (["--config", "p.yaml"], "takes no pipeline file")])
def test_flags_a_synth_run_cannot_use_are_refused_with_the_reason(flag, why, tmp_path, capsys):
    code = main(["synth", "rephrase", str(_docs(tmp_path)), "--server", NO_SERVER, "--model", "m", "--out",
                 str(tmp_path / "out"), *flag])
    err = capsys.readouterr().err
    assert code == 2 and f"`tokenmill synth rephrase` does not take {flag[0]}" in err and why in err


def test_a_bad_number_is_a_usage_error_naming_the_flag(tmp_path, capsys):
    code = main(["synth", "rephrase", str(_docs(tmp_path)), "--server", NO_SERVER, "--model", "m", "--out",
                 str(tmp_path / "out"), "--unit-bytes", "lots"])
    assert code == 2 and "--unit-bytes lots" in capsys.readouterr().err
