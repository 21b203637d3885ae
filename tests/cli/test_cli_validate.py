"""``tokenmill validate PIPELINE``: every problem at once, exit 1; a sound file exits 0. Nothing is written."""

from __future__ import annotations

import json

import yaml

from tokenmill.cli import main


def _inputs(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"body": f"document {i} about rivers and boats", "doc_id": i}) + "\n"
                            for i in range(8)))
    chats = tmp_path / "chats.jsonl"
    chats.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"q{i}?"},
                                                      {"role": "assistant", "content": f"a{i}."}]}) + "\n"
                             for i in range(8)))
    return docs, chats


def _write(tmp_path, doc: dict):
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_validate_reports_every_problem_and_exits_1(tmp_path, capsys):
    docs, chats = _inputs(tmp_path)
    path = _write(tmp_path, {
        "track": "pretrain", "inputs": [str(docs), str(chats)], "out": str(tmp_path / "out"),
        "tokenizer": str(tmp_path / "no-such-tokenizer.json"), "workers": 0,
        "steps": [{"name": "length", "min_chars": -1}],
        "schema": {"docs.jsonl": {"text": "bdoy", "id": "doc_id"}},
    })
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "5 problem(s)" in out
    assert "workers: expected a positive number" in out
    assert "steps[0]: min_chars: expected a whole number >= 0" in out
    assert "tokenizer: tokenizer file" in out and "does not exist" in out
    assert "schema['docs.jsonl'] for docs.jsonl: 'text' names field 'bdoy'" in out and "did you mean 'body'" in out
    assert "chats.jsonl: looks like sft data" in out
    assert "docs.jsonl: jsonl, pretrain" in out  # the route of each input is shown
    assert not (tmp_path / "out").exists()


def test_validate_a_sound_pipeline_exits_0(tmp_path, capsys):
    _, chats = _inputs(tmp_path)
    path = _write(tmp_path, {"track": "sft", "inputs": [str(chats)], "out": str(tmp_path / "out"),
                             "sft": {"train_on": "last", "max_length": 256}})
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"{path}: OK")


def test_validate_notes_keys_left_to_the_command_line_and_names_bad_sft_options(tmp_path, capsys):
    sft = {"train_on": "everything", "chat_template": str(tmp_path / "x.jinja")}
    path = _write(tmp_path, {"track": "sft", "sft": sft})
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "inputs: not set; give it on the command line" in out and "out: not set" in out
    assert "2 problem(s)" in out  # the keys the command line gives are notes, not problems
    assert "sft.train_on: expected one of assistant, last, all" in out and "sft.chat_template" in out


def test_validate_accepts_a_steps_only_pipeline_file_that_curate_runs(tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(f'{{"text": "document number {i} with some words in it"}}\n' for i in range(5)))
    path = _write(tmp_path, {"steps": [{"name": "length", "min_chars": 5}, {"name": "exact_dedup"}]})
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and "track: not named" in out and "missing" not in out
    assert main(["curate", str(docs), "--out", str(tmp_path / "cur"), "--config", str(path), "--no-progress"]) == 0


def test_validate_an_unreadable_file(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("track: [unclosed\n")
    assert main(["validate", str(path)]) == 1
    assert "not valid YAML" in capsys.readouterr().out
