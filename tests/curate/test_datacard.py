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
from tokenmill.curate.workflows.curate import run_curate
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
    assert card.data.license == [data["license"]] == ["other"] and len(data["licences"]) > 1  # a mix: issue 42 item 10
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


# --- issue 42: the header's licence (item 10), warnings (items 7-8), damaged outputs (item 18) -------------


def _licensed(tmp_path: Path, labels: list[str | None], name: str = "out") -> tuple[Path, dict]:
    rows = [{"text": f"{ARTICLE} Item {i}.", "license": lic} for i, lic in enumerate(labels)]
    jsonl(tmp_path / f"in-{name}" / "docs.jsonl", rows)
    out = tmp_path / name
    m = run_curate([str(tmp_path / f"in-{name}")], out=out, workers=1, report=False,
                   steps=[{"name": "license", "unknown": "keep"}])
    return out, m


def test_the_header_licence_is_other_unless_nearly_every_document_states_one(tmp_path):
    """2 of 40 documents stating CC BY 4.0 do not make the data set CC BY 4.0."""
    from huggingface_hub import DatasetCard

    out, _ = _licensed(tmp_path, ["cc-by-4.0", "mit"] + [None] * 38)
    assert DatasetCard.load(out / "datacard.md").data.license == ["unknown"]  # 38 of 40 state none: 95%
    out, _ = _licensed(tmp_path, ["cc-by-4.0"] * 2 + [None] * 18 + ["mit"] * 20, name="mixed")
    card = (out / "datacard.md").read_text()
    assert DatasetCard.load(out / "datacard.md").data.license == ["other"]
    assert "no one of them covers 95% of the documents" in card and "mit 20, unknown 18, cc-by-4.0 2" in card
    out, _ = _licensed(tmp_path, ["CC-BY-4.0"] * 39 + [None], name="one")
    assert DatasetCard.load(out / "datacard.md").data.license == ["cc-by-4.0"]
    assert json.loads((out / "datacard.json").read_text())["license"] == "cc-by-4.0"


def test_the_card_warns_when_robots_could_not_ask_for_most_documents(tmp_path):
    rows = [{"text": f"{ARTICLE} Item {i}.", "url": None} for i in range(9)]
    rows.append({"text": ARTICLE, "url": "https://icon-icons.com/icon/cat/1"})
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    out = tmp_path / "out"
    m = run_curate([str(src)], out=out, workers=1, report=False, steps=[{"name": "robots", "snapshot": str(ROBOTS_DIR)}])
    data = json.loads((out / "datacard.json").read_text())
    assert data["warnings"] == ["robots: 9 of 10 documents have no URL the step could read (no_url 9, bad_url 0): "
                                "robots.txt was not asked for them, and they were kept. Map the field holding each "
                                "page's URL as url"]
    assert "## Warnings" in (out / "datacard.md").read_text()
    assert m["counts"]["filtered"] == {"robots_v2:disallowed": 1}


def test_the_card_warns_when_the_snapshot_holds_none_of_the_hosts(tmp_path, capsys):
    snap = tmp_path / "other-crawl"
    snap.mkdir()
    (snap / "elsewhere.example.txt").write_text("User-agent: *\nDisallow: /\n")
    rows = [{"text": f"{ARTICLE} Item {i}.", "url": f"https://site{i}.example/a"} for i in range(5)]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    out = tmp_path / "out"
    run_curate([str(src)], out=out, workers=1, report=False, steps=[{"name": "robots", "snapshot": str(snap)}])
    warning = json.loads((out / "datacard.json").read_text())["warnings"]
    assert warning == [f"robots: the snapshot {snap} holds a robots.txt for none of the 5 documents' hosts: nothing "
                       "was judged. Give the crawl's own snapshot"]
    assert main(["card", str(out)]) == 0
    assert f"warning: {warning[0]}" in capsys.readouterr().err


def _curated(tmp_path: Path) -> tuple[Path, dict]:
    src, evals = _corpus(tmp_path)
    out = tmp_path / "out"
    return out, run_curate([str(src)], out=out, steps=_steps(evals), workers=1, report=False)


def test_tokenmill_card_refuses_an_output_with_missing_or_damaged_ledger_files(tmp_path, capsys):
    out, m = _curated(tmp_path)
    before = (out / "datacard.md").read_bytes()
    ledger = out / m["decision_ledger"]["files"][0]
    whole = ledger.read_bytes()
    ledger.write_bytes(whole[: len(whole) // 2])
    assert main(["card", str(out)]) == 1
    err = capsys.readouterr().err
    assert "the ledger file cannot be read" in err and str(ledger) in err and "Traceback" not in err
    ledger.unlink()
    assert main(["card", str(out)]) == 1
    err = capsys.readouterr().err
    assert "1 ledger file(s) that manifest.json lists are missing (ledger/" in err
    assert (out / "datacard.md").read_bytes() == before  # no card with false statements


@pytest.mark.parametrize("manifest", ["[]", "null", '{"counts": [1, 2]}', '{"decision_ledger": {"files": 3}}', '"x"'])
def test_tokenmill_card_refuses_a_manifest_that_is_not_a_run_manifest(tmp_path, capsys, manifest):
    """A tokenmill output whose manifest was damaged afterwards (a folder tokenmill did not write is refused
    before its manifest is read: tests/hostile/test_hostile_writers.py)."""
    out, _ = _curated(tmp_path)
    before = (out / "datacard.md").read_bytes()
    (out / "manifest.json").write_text(manifest)
    assert main(["card", str(out)]) == 1
    err = capsys.readouterr().err
    assert "manifest.json" in err and "Traceback" not in err and (out / "datacard.md").read_bytes() == before


def test_the_card_says_a_step_ran_when_it_ran_even_if_it_recorded_nothing(tmp_path):
    from tokenmill.report.datacard import card_data, render

    out, m = _curated(tmp_path)
    m = {**m, "steps": [*m["steps"], {"name": "language"}]}
    data = card_data(out, {**m, "decision_ledger": m["decision_ledger"]})
    data["languages"] = None  # as if the language step had left no column
    assert "No language step ran" not in render(data) and "The language step recorded no language." in render(data)
