"""Document steps on SFT data: the flat conversation view, filtering counted by reason, modifiers refused."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import trackkit as tk

from tokenmill.cli import main
from tokenmill.curate.report.funnel import parse_sets, recompute
from tokenmill.errors import ConfigError
from tokenmill.report.ledger import ledger_problems, read_ledger
from tokenmill.sft.corpus import build_sft_steps
from tokenmill.sft.run import run_sft
from tokenmill.sft.steps import conversation_batch
from tokenmill.shards import open_shards
from tokenmill.steps.contract import Scored


@dataclass(frozen=True)
class ResponseMentions:
    """score/decide: remove conversations whose assistant side mentions ``word``."""

    word: str = "boats"
    name: str = "mentions"
    version: int = 1

    def score(self, batch: pa.RecordBatch) -> Scored:
        return Scored({"hit": pc.match_substring(batch.column("response"), self.word).to_numpy(zero_copy_only=False)})

    def decide(self, scores):
        return np.where(scores["hit"], self.word, None)  # the rule; the engine names it <step>_v<version>:<rule>


def short_prompts(batch):
    """A plain step over the same view: drop prompts under 40 characters."""
    keep = pc.greater_equal(pc.utf8_length(batch.column("prompt")), 40)
    return batch.filter(keep), {"short_prompt": len(batch) - pc.sum(keep).as_py()}


@dataclass(frozen=True)
class Rewrite:
    name: str = "rewrite"
    version: int = 1

    def score(self, batch):
        return Scored({}, text=pc.utf8_upper(batch.column("text")))

    def decide(self, scores):
        return np.array([None] * 0)


def expected(rows: list[dict]) -> tuple[set[str], Counter]:
    kept, reasons = set(), Counter()
    for r in rows:
        prompt = "\n\n".join(m["content"] for m in r["messages"] if m["role"] == "user")
        response = "\n\n".join(m["content"] for m in r["messages"] if m["role"] == "assistant")
        if "boats" in response:
            reasons["mentions_v1:boats"] += 1
        elif len(prompt) < 40:
            reasons["short_prompts_v1:short_prompt"] += 1
        else:
            kept.add(r["id"])
    return kept, reasons


def test_conversation_view_columns():
    conv = {"id": "c1", "source": "x.jsonl", "meta": None, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"},
        {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "More?"},
        {"role": "assistant", "content": "No."}]}
    row = conversation_batch([conv]).to_pylist()[0]
    assert row["text"] == "Be brief.\n\nHi?\n\nHello.\n\nMore?\n\nNo."
    assert (row["prompt"], row["response"]) == ("Hi?\n\nMore?", "Hello.\n\nNo.")
    assert (row["id"], row["source"], row["url"]) == ("c1", "x.jsonl", None)


@pytest.mark.parametrize("workers", [1, 2])
def test_steps_filter_conversations_counted_by_reason(tmp_path, workers):
    src = tmp_path / "chats.jsonl"
    rows = tk.write_chats(src, 90, seed=8)
    m = run_sft([str(src)], out=tmp_path / "out", steps=[ResponseMentions(), short_prompts], workers=workers,
                unit_bytes=4000, verify=0, progress=False)
    kept, reasons = expected(rows)
    assert reasons["mentions_v1:boats"] > 0 and reasons["short_prompts_v1:short_prompt"] > 0 and kept
    assert m["counts"]["filtered"] == dict(reasons)
    assert m["counts"]["kept"] == len(kept) and m["counts"]["balanced"]
    shards = open_shards(tmp_path / "out")
    assert {shards[i]["id"] for i in range(len(shards))} == kept
    assert m["config"]["steps"][0] == {"name": "mentions", "version": 1,
                                       "params": {"word": "boats", "name": "mentions", "version": 1}}


def test_a_step_that_rewrites_text_is_refused_on_conversations(tmp_path):
    src = tmp_path / "chats.jsonl"
    tk.write_chats(src, 5)
    with pytest.raises(ConfigError, match="rewrites text"):
        run_sft([str(src)], out=tmp_path / "out", steps=[Rewrite()], workers=1, verify=0, progress=False)


def test_steps_on_conversations_write_a_decision_ledger_that_tells_every_records_fate(tmp_path):
    """Steps, a broken line, a render reject (too long) after the steps: one ledger row per input record."""
    src = tmp_path / "chats.jsonl"
    rows = tk.write_chats(src, 60, seed=8, broken_every=20)
    out = tmp_path / "out"
    m = run_sft([str(src)], out=out, steps=[ResponseMentions(), short_prompts], workers=1, unit_bytes=4000,
                verify=0, max_length=48, progress=False)
    assert m["counts"]["rejected"].get("too_long", 0) > 0 and m["counts"]["rejected"]["malformed_json"] == 3
    assert ledger_problems(out, m) == []
    ledger = read_ledger(out, m).to_pylist()
    assert len(ledger) == 63
    by_id = {r["id"]: r for r in ledger if r["id"] is not None}
    kept, reasons = expected(rows)
    for row in rows:
        if row["id"] not in kept and by_id[row["id"]]["reason"] is not None:
            assert by_id[row["id"]]["reason"].split(":")[0] in ("mentions_v1", "short_prompts_v1")
    assert {e["id"] for e in m["steps"]} == {"mentions_v1", "short_prompts_v1"}
    assert m["funnel"]["kept"] == m["counts"]["kept"]


def test_sft_command_with_steps_writes_a_ledger_the_funnel_reads(tmp_path):
    src = tmp_path / "chats.jsonl"
    tk.write_chats(src, 40, seed=3)
    (tmp_path / "pipeline.yaml").write_text("track: sft\nsteps:\n  - {name: length, min_chars: 120}\n")
    out = tmp_path / "out"
    assert main(["sft", str(src), "--out", str(out), "--config", str(tmp_path / "pipeline.yaml"), "--workers", "1",
                 "--verify", "0", "--no-progress"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert 0 < m["counts"]["filtered"]["length_v1:too_short"] < 40
    assert ledger_problems(out, m) == [] and (out / "ledger").is_dir()
    assert recompute(out, parse_sets(["length.min_chars=0"]))["kept"] == 40  # replayed from the ledger's scores


def test_corpus_steps_removals_reach_the_sft_ledger(tmp_path):
    src = tmp_path / "chats.jsonl"
    rows = tk.write_chats(src, 30, seed=5)
    with open(src, "a", encoding="utf-8") as f:
        for row in rows[:6]:  # the same conversations again, under other ids
            f.write(json.dumps({**row, "id": row["id"] + "-copy"}) + "\n")
    out = tmp_path / "out"
    m = run_sft([str(src)], out=out, steps=[ResponseMentions(), *build_sft_steps([{"name": "exact_dedup"}])], workers=1, verify=0,
                progress=False)
    assert m["counts"]["filtered"]["exact_dedup_conversation_v1:duplicate"] > 0
    assert ledger_problems(out, m) == []
