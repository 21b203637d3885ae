"""The ``consent`` preset (robots + tdm_optout + licence allow-list) in front of another preset, through
``tokenmill curate`` and inside ``tokenmill pretrain``, with ``--robots-snapshot`` and ``robots_snapshot:``."""

from __future__ import annotations

import json

import pytest
from consentkit import ARTICLE, ROBOTS_DIR, URLS, jsonl

from tokenmill.cli import main

pytest.importorskip("protego")


def test_consent_preset_in_front_of_another_through_the_cli(tmp_path, capsys):
    rows = [{"text": ARTICLE + " " + ARTICLE, "url": u} for u in URLS]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    out = tmp_path / "out"
    assert main(["curate", str(src), "--out", str(out), "--preset", "consent+c4", "--robots-snapshot", str(ROBOTS_DIR),
                 "--workers", "1", "--no-progress"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert [s["name"] for s in m["config"]["steps"]][:4] == ["robots", "tdm_optout", "license", "language"]
    assert m["counts"]["filtered"]["robots_v2:disallowed"] == 4
    assert main(["curate", str(src), "--out", str(tmp_path / "o2"), "--preset", "consent"]) == 1
    assert "--robots-snapshot PATH" in capsys.readouterr().err
    cfg = tmp_path / "p.yaml"
    cfg.write_text(f"preset: consent\nrobots_snapshot: {ROBOTS_DIR}\n")
    assert main(["curate", str(src), "--out", str(tmp_path / "o3"), "--config", str(cfg), "--workers", "1"]) == 0


def test_consent_preset_inside_pretrain(tmp_path):
    rows = [{"text": ARTICLE, "url": u} for u in URLS]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    out = tmp_path / "shards"
    assert main(["pretrain", str(src), "--out", str(out), "--preset", "consent", "--robots-snapshot", str(ROBOTS_DIR),
                 "--tokenizer", "default", "--workers", "1", "--no-progress"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["counts"]["kept"] == len(URLS) - 5  # 4 disallowed, 1 unreadable
