"""`tokenmill pretrain` with curation steps: same steps in the same pass, ledger beside the shards."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from curatekit import write_corpus

from tokenmill.cli import main
from tokenmill.curate.report.funnel import recompute
from tokenmill.curate.workflows.curate import run_curate


def test_pretrain_steps_write_a_ledger_and_match_curate(tmp_path, capsys):
    src = write_corpus(tmp_path / "web.jsonl")
    cfg = tmp_path / "p.yaml"
    cfg.write_text("steps:\n  - {name: language, languages: [en]}\n  - {name: pii}\n")
    assert main(["pretrain", str(src), "--out", str(tmp_path / "shards"), "--config", str(cfg), "--workers", "1",
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "funnel:" in printed and "language_v1" in printed
    m = json.loads((tmp_path / "shards" / "manifest.json").read_text())
    ledger = pq.read_table(tmp_path / "shards" / m["stage_ledgers"]["pretrain"][0])
    assert {"language.label", "pii.email", "source", "loc", "kept", "reason"} <= set(ledger.column_names)
    assert m["counts"]["balanced"] and m["counts"]["kept"] == sum(ledger.column("kept").to_pylist())
    curated = run_curate([str(src)], out=tmp_path / "cur", workers=1, report=False,
                         steps=[{"name": "language", "languages": ["en"]}, {"name": "pii"}])
    assert curated["counts"]["filtered"] == m["counts"]["filtered"]
    assert recompute(tmp_path / "shards", {})["kept"] == m["counts"]["kept"]


def test_pretrain_preset_none_and_unknown_preset(tmp_path, capsys):
    src = write_corpus(tmp_path / "web.jsonl", bad_rows=False)
    assert main(["pretrain", str(src), "--out", str(tmp_path / "a"), "--preset", "none", "--workers", "1",
                 "--no-progress"]) == 0
    assert main(["pretrain", str(src), "--out", str(tmp_path / "b"), "--preset", "nope"]) == 1
    assert "unknown preset" in capsys.readouterr().err
    assert main(["pretrain", str(src), "--out", str(tmp_path / "b"), "--preset", "dclm"]) == 1
    assert "dedup" in capsys.readouterr().err
