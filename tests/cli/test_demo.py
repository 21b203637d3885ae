"""The Quick start's first command: `tokenmill demo` runs both tracks end to end and shows a packed batch."""

from __future__ import annotations

import json
import sys

import pytest

from tokenmill.cli import main
from tokenmill.shards import open_shards, verify_shards

pytest.importorskip("torch")


def test_demo_routes_runs_both_tracks_blends_and_reports(tmp_path, capsys, monkeypatch):
    monkeypatch.delitem(sys.modules, "this", raising=False)  # a module that prints when first imported
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"== 1. mixed input written to {out / 'input'}"), text[:200]
    assert "not taken: preferences.json (preference)" in text
    assert "transcripts_as_text.jsonl (sft" in text and "pretraining costume" in text
    pre = json.loads((out / "pretrain" / "manifest.json").read_text())
    sft = json.loads((out / "sft" / "manifest.json").read_text())
    for m in (pre, sft):
        assert m["counts"]["balanced"] and sum(m["counts"]["rejected"].values()) > 0
    assert pre["counts"]["rejected"] == {"invalid_utf8": 1, "malformed_json": 1, "wrong_type": 1}
    assert sft["counts"]["rejected"] == {"consecutive_roles": 1, "empty_assistant": 1}
    assert sft["report"]["control_tokens_neutralised"] == 2
    assert sft["report"]["parity"]["checked"] + sft["report"]["parity"]["exempt"] == sft["counts"]["kept"]
    assert verify_shards(out / "pretrain") == [] and verify_shards(out / "sft") == []
    assert open_shards(out / "sft").has_mask and not open_shards(out / "pretrain").has_mask
    rows = [line for line in text.splitlines() if line.strip().startswith("row ")]
    assert len(rows) == 4 and any("sft" in r for r in rows) and any("pretrain" in r for r in rows)
    assert "[[" in text and "<|im_end|>]]" in text  # trained spans end with the stop token
