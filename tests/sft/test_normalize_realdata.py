"""Real-data tier: every record of the public SFT files in ../shared/data normalises or is rejected for a reason."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tokenmill.errors import RoutingError
from tokenmill.records import CONVERSATION
from tokenmill.sft.normalize import normalize_rows, to_arrow
from tokenmill.sft.validate import validate_conversation

pytestmark = pytest.mark.realdata

BASE = {"record": "Conversation", "tools": None, "reasoning": None, "id": None, "system": None}
SHAREGPT = {**BASE, "style": "sharegpt", "messages": "conversations", "role_key": "from", "content_key": "value"}


def load(shared_data: Path, name: str) -> list:
    path = shared_data / "sft" / name
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return json.loads(path.read_text(encoding="utf-8"))


def normalize(rows: list, name: str, schema: dict):
    kept, rejects = normalize_rows(rows, list(range(1, len(rows) + 1)), source=name, schema=schema)
    assert len(kept) + len(rejects) == len(rows)
    batch = to_arrow(kept)
    assert batch.schema == CONVERSATION and batch.num_rows == len(kept)
    assert all(validate_conversation(c) is None for c in kept)
    return kept, rejects


def test_alpaca_demo(shared_data):
    rows = load(shared_data, "llamafactory_alpaca_en_demo.json")
    schema = {**BASE, "style": "alpaca", "instruction": "instruction", "input": "input", "output": "output"}
    kept, rejects = normalize(rows, "alpaca.json", schema)
    assert len(rows) == 999 and len(kept) == sum(bool(r["output"].strip()) for r in rows) and rejects == []
    for row, c in zip(rows, kept):
        user = row["instruction"] + ("\n" + row["input"] if row["input"] else "")
        assert [(m["role"], m["content"]) for m in c["messages"]] == [("user", user), ("assistant", row["output"])]
    assert kept[41]["id"] == "alpaca.json:42"


def test_fastchat_sharegpt_keeps_own_ids(shared_data):
    rows = load(shared_data, "fastchat_dummy_conversation_sharegpt.json")
    kept, rejects = normalize(rows, "fastchat.json", {**SHAREGPT, "id": "id"})
    assert len(kept) == 500 and rejects == []
    assert [c["id"] for c in kept] == [r["id"] for r in rows]
    assert [len(c["messages"]) for c in kept] == [len(r["conversations"]) for r in rows]


def test_glaive_toolcalls(shared_data):
    rows = load(shared_data, "llamafactory_glaive_toolcall_en_demo.json")
    kept, rejects = normalize(rows, "glaive.json", {**SHAREGPT, "tools": "tools"})
    assert len(kept) == 300 and rejects == []
    froms = Counter(t["from"] for r in rows for t in r["conversations"])
    msgs = [m for c in kept for m in c["messages"]]
    assert sum(m["role"] == "tool" for m in msgs) == froms["observation"]
    calls = [call for m in msgs for call in m["tool_calls"] or []]
    assert len(calls) == froms["function_call"] > 0
    assert all(isinstance(json.loads(call["arguments"]), dict) for call in calls)
    with_tools = [bool(json.loads(r["tools"] or "[]")) for r in rows]
    assert [c["tools"] is not None for c in kept] == with_tools
    for c in kept:  # every tool result carries the name of the call it answers
        for prev, m in zip(c["messages"], c["messages"][1:]):
            if m["role"] == "tool":
                assert m["name"] == prev["tool_calls"][0]["name"]


def test_llamafactory_v1_typed_parts_and_loss_weight(shared_data):
    rows = load(shared_data, "llamafactory_v1_sft_demo.jsonl")
    schema = {**BASE, "style": "messages", "messages": "messages", "role_key": "role", "content_key": "content"}
    kept, rejects = normalize(rows, "v1.jsonl", schema)
    assert len(kept) == 500 and rejects == []
    for row, c in zip(rows, kept):
        expected = [("".join(p["value"] for p in t["content"]), t["loss_weight"]) for t in row["messages"]]
        assert [(m["content"], m["weight"]) for m in c["messages"]] == expected


def test_openai_toy_set_rejects_the_malformed_records(shared_data):
    rows = load(shared_data, "openai_toy_chat_fine_tuning_messages.jsonl")
    kept, rejects = normalize(rows, "toy.jsonl", {**BASE, "style": "messages", "messages": "messages"})
    without_user = [i for i, r in enumerate(rows, 1) if all(m["role"] != "user" for m in r["messages"])]
    assert without_user and [(r.loc, r.reason) for r in rejects] == [(i, "no_user") for i in without_user]
    assert len(kept) == len(rows) - len(without_user)
    assert max(len(m["content"]) for c in kept for m in c["messages"]) > 10_000  # long, but well-formed: kept


def test_deepseek_r1_reasoning_column(shared_data):
    rows = load(shared_data, "reasoning_deepseek_r1_openrouter_outputs.json")
    schema = {
        **BASE,
        "style": "problem_solution",
        "prompt": "problem",
        "response": "message_content",
        "reasoning": "message_thinking",
    }
    kept, rejects = normalize(rows, "r1.json", schema)
    assert len(kept) == len(rows) == 5 and rejects == []
    for row, c in zip(rows, kept):
        user, assistant = c["messages"]
        assert (user["content"], assistant["content"]) == (row["problem"], row["message_content"])
        assert assistant["reasoning"] == row["message_thinking"]
        assert json.loads(c["meta"]) == {"gtruth_answer": row["gtruth_answer"]}


@pytest.mark.parametrize(
    "name, style, prompt, response",
    [
        ("gsm8k_train.jsonl", "question_answer", "question", "answer"),
        ("dolly15k_subset_151_alpaca_prompt.jsonl", "prompt_response", "prompt", "answer"),
    ],
)
def test_pairs(shared_data, name, style, prompt, response):
    rows = load(shared_data, name)
    kept, rejects = normalize(rows, name, {**BASE, "style": style, "prompt": prompt, "response": response})
    assert len(kept) == sum(bool(r[response].strip()) for r in rows) == len(rows) and rejects == []
    assert [c["messages"][1]["content"] for c in kept] == [r[response] for r in rows]


def test_dpo_demo_refused_then_chosen_side_by_mapping(shared_data):
    rows = load(shared_data, "llamafactory_dpo_en_demo.json")
    with pytest.raises(RoutingError, match="'chosen' and 'rejected'"):
        normalize_rows(
            rows,
            [1] * len(rows),
            source="dpo.json",
            schema={"record": None, "style": "preference", "chosen": "chosen", "rejected": "rejected"},
        )
    kept, rejects = normalize(rows, "dpo.json", {**SHAREGPT, "response": "chosen", "meta": []})
    assert len(kept) == 300 and rejects == []
    assert [c["messages"][-1]["content"] for c in kept] == [r["chosen"]["value"] for r in rows]
