"""The data card (``datacard.md``, ``datacard.json``): loaded by huggingface_hub's ``DatasetCard``, every number
equal to the manifest's or the ledger's, rebuilt by ``tokenmill card DIR`` byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from consentkit import ARTICLE, ROBOTS_DIR, URLS, jsonl
from curatekit import OTHER

from tokenmill.cli import main
from tokenmill.curate.run import run_curate
from tokenmill.report.datacard import size_category, write_datacard

pytest.importorskip("protego")


def _corpus(tmp_path: Path) -> tuple[Path, Path]:
    rows = [{"text": f"{ARTICLE} Item {i}.", "url": u, "license": lic}
            for i, (u, lic) in enumerate(zip(URLS, ["cc-by-4.0", "mit", None, "cc-by-4.0", "MIT", None, "cc0"]))]
    rows += [{"text": ARTICLE + " Item 5.", "url": "https://fresh.example/a", "license": None},  # a copy of a kept row
             {"text": OTHER[0], "url": "https://de.example/b", "license": "cc-by-4.0"},
             {"text": "What is the sum of two and two and three and four and five and six and seven?", "url": None}]
    jsonl(tmp_path / "in" / "web.jsonl", rows)
    jsonl(tmp_path / "in" / "more.jsonl", [{"text": f"{ARTICLE} More {i}.", "license": "cc-by-sa-4.0"}
                                             for i in range(3)])
    evals = jsonl(tmp_path / "gsm8k_test.jsonl", [{"question": rows[-1]["text"]}])
    return tmp_path / "in", evals


def _steps(evals: Path) -> list[dict]:
    return [{"name": "robots", "snapshot": str(ROBOTS_DIR)}, {"name": "tdm_optout"},
            {"name": "license", "detect": True, "unknown": "keep"}, {"name": "language", "languages": ["en"]},
            {"name": "exact_dedup"}, {"name": "decontaminate", "eval": [str(evals)]}]


def test_card_numbers_are_the_manifests_and_the_ledgers(tmp_path):
    src, evals = _corpus(tmp_path)
    out = tmp_path / "out"
    m = run_curate([str(src)], out=out, steps=_steps(evals), workers=1, report=False)
    path = write_datacard(out, m)
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(path)
    data = json.loads((out / "datacard.json").read_text())
    assert card.data.size_categories == [size_category(m["counts"]["kept"])] == ["n<1K"]
    assert data["documents"] == m["counts"]["kept"] and data["input_records"] == m["counts"]["input"]
    ledger = pq.read_table(out / "ledger").to_pylist()  # the run's one table: one row per input record
    assert len(ledger) == m["counts"]["input"] and sum(d["kept"] for d in ledger) == m["counts"]["kept"]
    f = m["counts"]["filtered"]
    assert sum(data["opt_outs"]["robots_disallowed_by_agent"].values()) == f["robots_v2:disallowed"]
    assert data["decontamination"] == {"gsm8k_test": f["decontaminate_v2:gsm8k_test"]}
    assert data["dedup"][0]["removed"] == f["exact_dedup_v1:duplicate"] == 1
    assert sum(data["languages"].values()) == m["counts"]["kept"] and set(card.data.language) == {"en"}
    assert sorted(card.data.license) == sorted(k for k in data["licences"] if k != "unknown")
    assert {s["source"]: s["records"] for s in data["sources"]} == {"web.jsonl": len(URLS) + 3, "more.jsonl": 3}
    assert sum(s["kept"] for s in data["sources"]) == m["counts"]["kept"]
    text = path.read_text()
    assert "## Opt-outs honoured" in text and f"CCBot {f['robots_v2:disallowed']}" in text


def test_tokenmill_card_rebuilds_the_same_bytes_and_refuses_a_directory_without_a_run(tmp_path, capsys):
    src, evals = _corpus(tmp_path)
    out = tmp_path / "out"
    m = run_curate([str(src)], out=out, steps=_steps(evals), workers=1, report=False)
    write_datacard(out, {**m, "command": "tokenmill curate in --out out"})
    before = (out / "datacard.md").read_bytes(), (out / "datacard.json").read_bytes()
    assert main(["card", str(out)]) == 0
    assert ((out / "datacard.md").read_bytes(), (out / "datacard.json").read_bytes()) == before
    assert "`tokenmill curate in --out out`" in before[0].decode()  # kept from the card written before
    assert main(["card", str(tmp_path / "nothing")]) == 1
    assert "no manifest.json" in capsys.readouterr().err


def test_pretrain_card_has_tokens_per_source_and_the_tokenizer(tmp_path):
    src, _ = _corpus(tmp_path)
    out = tmp_path / "shards"
    assert main(["pretrain", str(src), "--out", str(out), "--preset", "consent", "--robots-snapshot", str(ROBOTS_DIR),
                 "--tokenizer", "default", "--workers", "1", "--no-progress"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    data = json.loads((out / "datacard.json").read_text())  # written by the run
    assert data["funnel"] and data["opt_outs"]["robots_disallowed_by_agent"]
    assert {s["source"]: s["tokens"] for s in data["sources"]} == {k: v["tokens"] for k, v in m["sources"].items()}
    assert data["tokens"] == m["counts"]["tokens"] > 0
    assert data["tokenizer"]["fingerprint"] == m["tokenizer"]["fingerprint"]
    text = (out / "datacard.md").read_text()
    assert m["tokenizer"]["fingerprint"] in text and "license:" in text.split("---")[1]


def test_curate_writes_its_card_with_the_command(tmp_path, monkeypatch):
    src, evals = _corpus(tmp_path)
    out = tmp_path / "out"
    monkeypatch.setattr("sys.argv", ["/usr/bin/tokenmill", "curate", str(src), "--out", str(out)])
    assert main(["curate", str(src), "--out", str(out), "--preset", "consent", "--robots-snapshot", str(ROBOTS_DIR),
                 "--workers", "1", "--no-progress"]) == 0
    data = json.loads((out / "datacard.json").read_text())
    assert data["command"] == f"tokenmill curate {src} --out {out}"
    assert data["documents"] == json.loads((out / "manifest.json").read_text())["counts"]["kept"]
