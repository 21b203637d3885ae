"""Real-data tier: the public files in ../shared/data route to the right track (sampled, so fast)."""

from __future__ import annotations

import json

import pytest

from tokenmill.route import inspect

pytestmark = pytest.mark.realdata


def kinds_under(folder) -> dict[str, str]:
    return {r.path.rsplit("/", 1)[-1]: r.kind for r in inspect([str(folder)], sample=100)}


def test_sft_folder(shared_data):
    kinds = kinds_under(shared_data / "sft")
    assert len(kinds) == len(list((shared_data / "sft").iterdir()))
    expected = {name: "preference" if name == "llamafactory_dpo_en_demo.json" else "sft" for name in kinds}
    assert kinds == expected


def test_pretrain_folder(shared_data):
    kinds = kinds_under(shared_data / "pretrain")
    assert len(kinds) == len(list((shared_data / "pretrain").iterdir()))
    assert kinds == {name: "pretrain" for name in kinds}


@pytest.mark.parametrize(
    ("name", "style", "prompt", "response"),
    [
        ("gsm8k_test.jsonl", "question_answer", "question", "answer"),
        ("math500_test.json", "problem_solution", "problem", "solution"),
    ],
)
def test_eval_sets_are_sft(shared_data, name, style, prompt, response):
    (route,) = inspect([str(shared_data / "eval" / name)], sample=50)
    assert route.kind == "sft" and route.confidence == 1.0
    assert (route.schema["style"], route.schema["prompt"], route.schema["response"]) == (style, prompt, response)


def chatml(turns: list[tuple[str, str]]) -> str:
    return "".join(f"<|im_start|>{role}\n{text}<|im_end|>\n" for role, text in turns)


def alpaca_text(rec: dict) -> str:
    task = rec["instruction"] + ("\n\n" + rec["input"] if rec["input"] else "")
    return f"Below is an instruction.\n\n### Instruction:\n{task}\n\n### Response:\n{rec['output']}"


def test_rendered_transcripts_in_a_text_column_are_sft(shared_data, tmp_path):
    roles = {"human": "user", "gpt": "assistant"}
    convs = json.loads((shared_data / "sft" / "fastchat_dummy_conversation_sharegpt.json").read_text())[:100]
    alpaca = json.loads((shared_data / "sft" / "llamafactory_alpaca_en_demo.json").read_text())[:100]
    docs = [{"text": chatml([(roles[t["from"]], t["value"]) for t in c["conversations"]])} for c in convs]
    docs += [{"text": alpaca_text(r)} for r in alpaca]
    path = tmp_path / "rendered.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    (route,) = inspect([str(path)], sample=200)
    assert (route.kind, route.confidence) == ("sft", 1.0)
    assert route.schema["style"] == "rendered_text"
    assert set(route.schema["markers"]) >= {"chatml", "alpaca"}
    assert "SFT data in a pretraining costume" in route.warnings[0]


def test_web_documents_as_alpaca_outputs_are_pretrain(shared_data, tmp_path):
    lines = (shared_data / "pretrain" / "llamafactory_c4_demo.jsonl").read_text().splitlines()[:60]
    recs = [{"instruction": "", "input": "", "output": json.loads(line)["text"]} for line in lines]
    path = tmp_path / "disguised.json"
    path.write_text(json.dumps(recs))
    (route,) = inspect([str(path)])
    assert route.kind == "pretrain"
    assert route.schema == route.schema | {"record": "Document", "text": "output"}
    assert "responses look like whole web pages with empty prompts" in route.warnings[0]


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("sft/llamafactory_glaive_toolcall_en_demo.json", {"style": "sharegpt", "tools": "tools"}),
        (
            "sft/llamafactory_v1_sft_demo.jsonl",
            {"style": "messages", "content_parts": True, "weight_key": "loss_weight"},
        ),
        (
            "sft/reasoning_deepseek_r1_openrouter_outputs.json",
            {"prompt": "problem", "response": "message_content", "reasoning": "message_thinking"},
        ),
        ("sft/llamafactory_dpo_en_demo.json", {"chosen": "chosen", "rejected": "rejected", "prompt": "conversations"}),
        ("pretrain/dolma_cc_en_head-0091.jsonl", {"text": "text", "id": "id", "url": "metadata.url"}),
        ("pretrain/dolma_sample-0000.warc.gz", {"record": "Document", "text": "text", "url": "url"}),
    ],
)
def test_real_schemas(shared_data, rel, expected):
    (route,) = inspect([str(shared_data / rel)], sample=50)
    assert {k: route.schema.get(k) for k in expected} == expected
