"""``tokenmill sft select`` with the task mix: labels in selection.parquet, the mix in the manifest and the data
card, ``--mix`` drawing each label's quota by score within the per-cluster limit."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tokenmill.cli import main
from tokenmill.errors import ConfigError
from tokenmill.sft.report import task_of
from tokenmill.sft.run import run_sft
from tokenmill.sft.select import Selection

ACADEMIC = [
    "Which planet is largest?\n(A) Mars (B) Jupiter (C) Venus (D) Earth\nAnswer:",
    "Which gas do plants take in?\nA. Oxygen\nB. Carbon dioxide\nC. Helium\nAnswer:",
    "Solve 2x + 6 = 10 and put your final answer within \\boxed{}.",
]
USER = [
    "Can you help me plan a weekend in Lisbon with my partner?",
    "Write a short poem about my grandmother's garden in spring",
    "What should I cook tonight with leftover rice and some eggs?",
    "How do I politely tell my neighbour that his dog barks at night?",
    "Suggest a name for my new bakery that sells sourdough bread",
]


FACTS = ["Rivers carve valleys over long ages.", "Bread rises as yeast makes gas.", "Owls hunt mostly at night.",
         "Copper conducts heat very well.", "Glaciers move a few metres a year.", "Bees dance to share where food is.",
         "Salt lowers the freezing point of water.", "Moss grows where the shade keeps it damp."]


def _write(tmp_path, academic=ACADEMIC, user=USER):
    rows = []
    for k, q in enumerate([*academic, *user]):  # longer answers later: the last of each kind scores highest
        rows.append({"instruction": q, "output": " ".join(FACTS[:k + 1])})
    rows.append({"instruction": "Say hi", "output": ""})  # rejected: never labelled
    f = tmp_path / "mixed.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def _ledger(out):
    return pq.read_table(out / "selection.parquet").to_pylist()


def test_selection_parquet_labels_every_scored_prompt_with_score_and_cues(tmp_path):
    out = tmp_path / "sel"
    assert main(["sft", "select", str(_write(tmp_path)), "--out", str(out), "--n", "8"]) == 0
    rows = _ledger(out)
    by_loc = {r["loc"]: r for r in rows}
    assert [by_loc[k]["task.label"] for k in (1, 2, 3)] == ["academic"] * 3
    assert {by_loc[k]["task.label"] for k in range(4, 9)} == {"user"}
    assert "options" in by_loc[1]["task.cues"] and "boxed" in by_loc[3]["task.cues"]
    assert by_loc[1]["task.score"] >= 0.5 > by_loc[4]["task.score"]
    assert by_loc[9]["task.label"] is None and by_loc[9]["reason"].startswith("rejected:")
    m = json.loads((out / "manifest.json").read_text())
    mix = m["report"]["task_mix"]
    assert mix["scored"] == {"academic": 3, "user": 5} and mix["selected"] == {"academic": 3, "user": 5}
    selected = [json.loads(x) for x in (out / "selected.jsonl").read_text().splitlines()]
    assert {s["meta"]["task"] for s in selected} == {"academic", "user"}
    card = (out / "datacard.md").read_text()
    assert "## Task mix" in card and "academic 3" in card


def test_mix_draws_each_label_by_score(tmp_path):
    out = tmp_path / "sel"
    assert main(["sft", "select", str(_write(tmp_path)), "--out", str(out), "--n", "4",
                 "--mix", "academic=0.5,user=0.5"]) == 0
    rows = [r for r in _ledger(out) if r["selected"]]
    assert sorted((r["task.label"], r["loc"]) for r in rows) == [("academic", 2), ("academic", 3),
                                                                 ("user", 7), ("user", 8)]  # the best of each
    skipped = {r["loc"]: r["reason"] for r in _ledger(out) if r["loc"] in (1, 4)}
    assert skipped == {1: "not_selected:below_top_n", 4: "not_selected:mix_quota_full"}  # 1 scores lowest
    m = json.loads((out / "manifest.json").read_text())
    assert m["report"]["task_mix"]["asked"] == {"academic": 2, "user": 2}
    assert m["report"]["settings"]["mix"] == {"academic": 0.5, "user": 0.5}
    assert "warning" not in m["report"]
    assert "academic=0.5, user=0.5): academic 2, user 2" in (out / "datacard.md").read_text()


def test_a_label_short_of_its_quota_is_warned_with_counts(tmp_path, capsys):
    out = tmp_path / "sel"
    assert main(["sft", "select", str(_write(tmp_path)), "--out", str(out), "--n", "5",
                 "--mix", "academic=0.8,user=0.2"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["counts"]["kept"] == 4  # 3 academic (all there are) + 1 user: the mix is not filled with users
    warning = m["report"]["warning"]
    assert "academic 3 of 4 (3 scored" in warning
    err = capsys.readouterr().err
    assert err.count("academic 3 of 4") == 1  # said once (the other warning: 1 of the 9 records is rejected)
    assert "1 of 9 records (11%) were rejected (empty_assistant 1)" in err


def test_the_per_cluster_limit_holds_within_a_label(tmp_path):
    same = ["Which planet is largest?\n(A) Mars (B) Jupiter (C) Venus (D) Earth\nAnswer:"] * 3
    out = tmp_path / "sel"
    assert main(["sft", "select", str(_write(tmp_path, academic=same)), "--out", str(out), "--n", "4",
                 "--mix", "academic=0.5,user=0.5"]) == 0
    rows = _ledger(out)
    assert sum(r["selected"] and r["task.label"] == "academic" for r in rows) == 1
    assert "academic 1 of 2 (3 scored, 2 left out as their prompt cluster was full)" in json.loads(
        (out / "manifest.json").read_text())["report"]["warning"]


def test_bad_mix_is_a_one_line_usage_error(tmp_path, capsys):
    f = _write(tmp_path)
    for bad, says in [("academic=0.3,chat=0.7", "unknown label 'chat'"), ("academic=0.3,user=0.6", "sum to 1"),
                      ("academic=-0.5,user=1.5", "negative")]:
        assert main(["sft", "select", str(f), "--out", str(tmp_path / "s"), "--n", "3", "--mix", bad]) == 2
        err = capsys.readouterr().err
        first = err.splitlines()[0]
        assert first.startswith("usage error: --mix") and says in first and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_an_sft_run_over_a_selection_shows_its_task_mix_in_the_data_card(tmp_path):
    sel = tmp_path / "sel"
    assert main(["sft", "select", str(_write(tmp_path)), "--out", str(sel), "--n", "4",
                 "--mix", "academic=0.5,user=0.5"]) == 0
    m = run_sft([str(sel / "selected.jsonl")], out=tmp_path / "shards", workers=1, verify=0, progress=False)
    assert m["report"]["task_mix"] == {"academic": 2, "user": 2}
    card = json.loads((tmp_path / "shards" / "datacard.json").read_text())
    assert card["sft"]["task_mix"] == {"academic": 2, "user": 2}
    assert "Task mix (labelled by `tokenmill sft select`): academic 2, user 2" in (
        tmp_path / "shards" / "datacard.md").read_text()


def test_a_data_sets_own_task_field_is_not_taken_for_a_label():
    assert task_of(json.dumps({"meta": {"task": "qa"}})) == ""
    assert task_of(json.dumps({"task": "summarise"})) == ""
    assert task_of(json.dumps({"meta": {"selection_score": 1.0, "task": "user"}})) == "user"
    assert task_of("not json") == ""


def test_a_bad_mix_from_python_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown label 'chat'"):
        Selection(n=3, mix={"chat": 1.0})
    with pytest.raises(ConfigError, match="sum to 1"):
        Selection(n=3, mix={"academic": 0.2})
    assert Selection(n=3, mix={"user": 1.0}).mix == {"user": 1.0}
