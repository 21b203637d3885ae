"""tokenmill sft select: best N by score, at most K per prompt cluster, bad answers dropped, report."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tokenmill.cli import main


def _write(tmp_path):
    facts = ["Tides come from the pull of the moon.", "The sun adds a smaller pull of its own.",
             "Most coasts see two high waters a day.", "Spring tides follow new and full moons.",
             "Neap tides come at the quarter moons.", "Bays and shelves can make them much larger."]
    rows = []
    for i in range(6):  # one prompt six times, answers of growing length
        rows.append({"instruction": "Explain how tides work in the ocean please", "output": " ".join(facts[:i + 1])})
    for q, a in [("Name a prime number larger than ten", "11 is prime."), ("What colour is the sky on a clear day?", "Blue."),
                 ("Who wrote Pride and Prejudice?", "Jane Austen."), ("Translate 'gato' into English", "Cat.")]:
        rows.append({"instruction": q, "output": a})
    rows.append({"instruction": "Tell me a joke", "output": "As an AI language model, I cannot tell jokes."})
    rows.append({"instruction": "Say hi", "output": ""})
    f = tmp_path / "alpaca.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return f


def test_select_keeps_best_per_cluster_and_reports(tmp_path, capsys):
    f = _write(tmp_path)
    assert main(["sft", "select", str(f), "--out", str(tmp_path / "sel"), "--n", "3"]) == 0
    m = json.loads((tmp_path / "sel" / "manifest.json").read_text())
    c = m["counts"]
    assert c["input"] == 13 and c["kept"] == 3 and c["rejected"] == {"malformed_json": 1, "empty_assistant": 1}
    assert c["filtered"]["sft_quality_v2:refusal"] == 1 and c["balanced"]
    assert c["filtered"]["not_selected:cluster_full"] >= 5  # the tides rewordings are one cluster
    selected = [json.loads(x) for x in (tmp_path / "sel" / "selected.jsonl").read_text().splitlines()]
    tides = [s for s in selected if "tides" in s["messages"][0]["content"]]
    assert len(tides) == 1 and tides[0]["messages"][1]["content"].endswith("much larger.")  # the longest one
    ledger = pq.read_table(tmp_path / "sel" / "selection.parquet").to_pylist()
    assert sum(r["selected"] for r in ledger) == 3 and {r["cluster_size"] for r in ledger} >= {6}
    assert "3 kept of 13" in capsys.readouterr().out


def test_per_cluster_allows_more_from_one_cluster(tmp_path):
    f = _write(tmp_path)
    assert main(["sft", "select", str(f), "--out", str(tmp_path / "sel"), "--n", "10", "--per-cluster", "3"]) == 0
    selected = [json.loads(x) for x in (tmp_path / "sel" / "selected.jsonl").read_text().splitlines()]
    assert sum("tides" in s["messages"][0]["content"] for s in selected) == 3


def test_selected_file_goes_through_the_sft_track(tmp_path):
    f = _write(tmp_path)
    main(["sft", "select", str(f), "--out", str(tmp_path / "sel"), "--n", "4"])
    from tokenmill.sft.run import run_sft

    m = run_sft([str(tmp_path / "sel" / "selected.jsonl")], out=tmp_path / "shards", workers=1, verify=0, progress=False)
    assert m["counts"]["kept"] == 4


def test_bad_options_are_config_errors(tmp_path, capsys):
    f = _write(tmp_path)
    assert main(["sft", "select", str(f), "--out", str(tmp_path / "s"), "--n", "0", "--score", "quality"]) != 0
    err = capsys.readouterr().err
    assert "--n 0" in err and "--model" in err


def test_selection_parquet_has_a_row_for_every_input_example_with_why(tmp_path):
    f = _write(tmp_path)
    assert main(["sft", "select", str(f), "--out", str(tmp_path / "sel"), "--n", "3"]) == 0
    ledger = pq.read_table(tmp_path / "sel" / "selection.parquet").to_pylist()
    assert [r["loc"] for r in ledger] == list(range(1, 14))  # all 13 lines, in input order
    by_loc = {r["loc"]: r for r in ledger}
    assert by_loc[13]["reason"] == "rejected:malformed_json" and by_loc[13]["score"] is None
    assert by_loc[12]["reason"] == "rejected:empty_assistant"
    assert by_loc[11]["reason"] == "sft_quality_v2:refusal" and not by_loc[11]["selected"]
    assert all(r["reason"] for r in ledger if not r["selected"])
    assert sum(r["selected"] for r in ledger) == 3 and all(r["reason"] is None for r in ledger if r["selected"])
