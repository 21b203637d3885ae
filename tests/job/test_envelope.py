"""Every command is a Job of the one driver: each writes the same manifest envelope, a data card, and takes
``--dry-run`` and ``--limit`` alike (pretrain, sft, curate, decontaminate, sft select)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenmill.cli import main

ENVELOPE = {"tokenmill", "track", "inputs", "config", "counts", "identity", "run", "rejects_file", "skipped_inputs"}
RUN = {"seconds", "peak_rss", "units", "step_seconds", "stage_seconds", "engine"}


def _docs(path: Path, n: int = 30) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"d{i}", "text": f"Document number {i} talks about rivers, hills and the weather at length. " * 4}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return path


def _chats(path: Path, n: int = 30) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"messages": [{"role": "user", "content": f"Question {i}: how far is the river from hill {i}?"},
                          {"role": "assistant", "content": f"It is {i} kilometres away, past the old mill."}]}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return path


COMMANDS = {
    "pretrain": lambda t: ["pretrain", str(_docs(t / "in" / "docs.jsonl")), "--tokenizer", "default"],
    "sft": lambda t: ["sft", str(_chats(t / "in" / "chats.jsonl")), "--tokenizer", "default", "--verify", "0"],
    "curate": lambda t: ["curate", str(_docs(t / "in" / "docs.jsonl")), "--preset", "none"],
    "decontaminate": lambda t: ["decontaminate", str(_docs(t / "in" / "docs.jsonl")), "--eval",
                                str(_evals(t / "evals.jsonl")), "--"],
    "sft select": lambda t: ["sft", "select", str(_chats(t / "in" / "chats.jsonl")), "--n", "5"],
}


def _evals(path: Path) -> Path:
    path.write_text(json.dumps({"question": "what is the capital city of a country far away from here", "answer": "x"})
                    + "\n")
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_job_writes_one_envelope_and_a_data_card(command, tmp_path):
    out = tmp_path / "out"
    assert main([*COMMANDS[command](tmp_path), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert ENVELOPE <= set(manifest), sorted(ENVELOPE - set(manifest))
    assert set(manifest["run"]) == RUN and manifest["run"]["engine"] == "local"
    assert manifest["track"] == command and manifest["rejects_file"] == "rejects.jsonl"
    assert manifest["counts"]["rejected"] == {"malformed_json": 1}
    assert (out / "datacard.md").is_file() and json.loads((out / "datacard.json").read_text())["track"] == command
    lines = (out / "rejects.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["reason"] == "malformed_json"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_job_takes_dry_run_and_limit(command, tmp_path, capsys):
    out = tmp_path / "out"
    args = [*COMMANDS[command](tmp_path), "--out", str(out), "--workers", "1", "--no-progress"]
    assert main([*args, "--dry-run"]) == 0
    assert "dry run" in capsys.readouterr().out and not out.exists()
    assert main([*args, "--limit", "3"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["input"] == 3 and manifest["config"]["limit"] == 3


def test_an_sft_data_card_says_what_was_trained(tmp_path):
    out = tmp_path / "out"
    assert main([*COMMANDS["sft"](tmp_path), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    card = json.loads((out / "datacard.json").read_text())["sft"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert card["chat_template_hash"] == manifest["config"]["chat_template_hash"]
    assert card["schemas"] == {"messages": 1} and card["examples"] == 30 and card["dropped"] == {"malformed_json": 1}
    assert 0 < card["supervised_share"] < 1 and card["stop_token_trained_share"] == 1.0
    text = (out / "datacard.md").read_text()
    assert "## SFT examples" in text and "30 examples kept of 31 input records" in text
