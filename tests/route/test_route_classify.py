"""classify_rows over rows built in the tests: each style, disguised data, preference, unknown."""

from __future__ import annotations

import json
import random

import pytest
from route_samples import PROSE

from tokenmill.route import KINDS, classify_rows


def classify(rows, fmt="jsonl"):
    return classify_rows(rows, format=fmt)


def qa_rows(n=20):
    return [
        {"question": f"How many apples are left after eating {i}?", "answer": f"{10 - i} apples. " * 5}
        for i in range(n)
    ]


def test_prompt_completion():
    rows = [{"prompt": f"Write a haiku about {w}.", "completion": f"Soft {w} at dawn\n..."} for w in "abcdefgh"]
    kind, conf, ev, schema, warnings = classify(rows)
    assert (kind, conf, warnings) == ("sft", 1.0, [])
    assert schema["record"] == "Conversation"
    assert (schema["style"], schema["prompt"], schema["response"]) == ("prompt_response", "prompt", "completion")
    assert ev["fit"] == ev["agree"] == 8


def test_question_answer_and_problem_solution_pick_the_long_response():
    kind, _, _, schema, _ = classify(qa_rows())
    assert kind == "sft" and schema["style"] == "question_answer"
    rows = [
        {
            "problem": "Solve x + 1 = 2.",
            "solution": "Subtract one from both sides: x = 1." * 3,
            "answer": "1",
            "unique_id": f"p{i}",
        }
        for i in range(10)
    ]
    kind, _, _, schema, _ = classify(rows)
    assert kind == "sft"
    assert (schema["style"], schema["prompt"], schema["response"], schema["id"]) == (
        "problem_solution",
        "problem",
        "solution",
        "unique_id",
    )
    assert schema["meta"] == ["answer"]


def test_alpaca_with_system_and_history():
    rows = [
        {
            "instruction": "Translate to French.",
            "input": "good morning",
            "output": "bonjour",
            "system": "You are a translator.",
            "history": [["hi", "salut"]],
        }
        for _ in range(5)
    ]
    kind, conf, _, schema, _ = classify(rows)
    assert (kind, conf) == ("sft", 1.0)
    assert {k: schema[k] for k in ("style", "instruction", "input", "output", "system", "history")} == {
        "style": "alpaca",
        "instruction": "instruction",
        "input": "input",
        "output": "output",
        "system": "system",
        "history": "history",
    }


def test_sharegpt_with_tools_and_roles():
    conv = [
        {"from": "human", "value": "weather in Paris?"},
        {"from": "function_call", "value": "{}"},
        {"from": "observation", "value": '{"t": 20}'},
        {"from": "gpt", "value": "It is 20 C."},
    ]
    rows = [{"id": str(i), "conversations": conv, "tools": json.dumps([{"name": "weather"}])} for i in range(6)]
    kind, conf, _, schema, _ = classify(rows)
    assert (kind, conf) == ("sft", 1.0)
    assert (schema["style"], schema["messages"], schema["role_key"], schema["content_key"]) == (
        "sharegpt",
        "conversations",
        "from",
        "value",
    )
    assert schema["roles"] == ["function_call", "gpt", "human", "observation"]
    assert (schema["tools"], schema["id"]) == ("tools", "id")


def test_messages_with_reasoning_parts_and_weights():
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "2+2?"}], "loss_weight": 0.0},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "4"}],
            "reasoning_content": "add",
            "loss_weight": 1.0,
        },
    ]
    kind, _, _, schema, _ = classify([{"messages": msgs}] * 4)
    assert kind == "sft" and schema["style"] == "messages"
    assert (schema["role_key"], schema["content_key"], schema["content_parts"]) == ("role", "content", True)
    assert (schema["reasoning_key"], schema["weight_key"]) == ("reasoning_content", "loss_weight")


def test_top_level_reasoning_column():
    rows = [{"problem": "Is 7 prime?", "thinking": "Check divisors 2..2. None divide.", "message_content": "Yes."}] * 3
    kind, _, _, schema, _ = classify(rows)
    assert kind == "sft"
    assert (schema["prompt"], schema["response"], schema["reasoning"]) == ("problem", "message_content", "thinking")


def test_turn_list_with_unknown_keys_found_by_content():
    dialog = [
        {"who": "user", "utterance": "Can you recommend a book about rivers?"},
        {"who": "assistant", "utterance": "Try 'The River' by a local historian; it covers the mills."},
    ]
    kind, conf, _, schema, _ = classify([{"dialog": dialog, "n": i} for i in range(5)])
    assert (kind, conf) == ("sft", 0.85)
    assert (schema["messages"], schema["role_key"], schema["content_key"]) == ("dialog", "who", "utterance")


def test_unknown_names_question_and_answer_by_content():
    rows = [
        {"ask": f"What is the capital of country number {i}?", "said": f"It is city {i}, on the coast. " * 4}
        for i in range(10)
    ]
    kind, conf, ev, schema, _ = classify(rows)
    assert kind == "sft" and ev["schema_from"] == "content"
    assert (schema["prompt"], schema["response"]) == ("ask", "said")
    assert conf == pytest.approx(0.85)


def test_unknown_names_long_free_text_is_pretrain():
    rows = [{"blob": PROSE * 2, "n": i, "score": 0.5} for i in range(10)]
    kind, conf, ev, schema, _ = classify(rows)
    assert (kind, schema["record"], schema["text"], ev["schema_from"]) == ("pretrain", "Document", "blob", "content")
    assert schema["meta"] == ["n", "score"]
    assert conf == pytest.approx(0.85)


def test_question_titles_beside_a_text_column_stay_documents():
    rows = [
        {"title": f"How do I fix a bike, part {i}?", "text": PROSE * 2, "url": f"https://x.org/{i}"} for i in range(10)
    ]
    kind, conf, _, schema, _ = classify(rows)
    assert (kind, conf, schema["text"], schema["url"], schema["meta"]) == ("pretrain", 1.0, "text", "url", ["title"])


def test_nested_url_and_license_and_id():
    rows = [{"id": f"d{i}", "text": PROSE, "metadata": {"url": "https://a.b", "license": "cc-by"}} for i in range(3)]
    _, _, _, schema, _ = classify(rows)
    assert (schema["id"], schema["url"], schema["license"]) == ("id", "metadata.url", "metadata.license")
    assert schema["meta"] == ["metadata"]


def test_numeric_table_is_unknown():
    rows = [{"a": i, "b": i * 0.5, "label": "x"} for i in range(30)]
    kind, conf, _, schema, warnings = classify(rows)
    assert (kind, conf, schema) == ("unknown", 1.0, {"record": None, "columns": ["a", "b", "label"]})
    assert "no text" in warnings[0]


def test_no_rows_is_unknown_with_zero_confidence():
    kind, conf, ev, _, warnings = classify([])
    assert (kind, conf, ev["records"]) == ("unknown", 0.0, 0)
    assert warnings


def test_preference_names_its_columns():
    rows = [{"prompt": "Say hi.", "chosen": "Hi!", "rejected": "No."}] * 4
    kind, conf, _, schema, _ = classify(rows)
    assert (kind, conf) == ("preference", 1.0)
    assert {k: schema[k] for k in ("record", "chosen", "rejected", "prompt")} == {
        "record": None,
        "chosen": "chosen",
        "rejected": "rejected",
        "prompt": "prompt",
    }


def test_preference_over_sharegpt_turns():
    rows = [
        {
            "conversations": [{"from": "human", "value": "hi"}],
            "chosen": {"from": "gpt", "value": "hello"},
            "rejected": {"from": "gpt", "value": "go away"},
        }
    ] * 3
    kind, _, _, schema, _ = classify(rows)
    assert kind == "preference" and schema["prompt"] == "conversations"


def test_confidence_is_the_share_of_agreeing_records():
    rows = qa_rows(6) + [{"question": "", "answer": "orphan answer"}] * 2 + [{"question": "q?", "answer": ""}] * 2
    kind, conf, ev, _, warnings = classify(rows)
    assert (kind, conf, ev["agree"]) == ("sft", 0.6, 6)
    assert warnings == ["4 of 10 records lack a non-empty prompt or response"]


def test_rendered_prompt_template_is_flagged():
    prompt = "Below is an instruction.\n\n### Instruction:\nName a colour.\n\n### Response:"
    kind, _, _, _, warnings = classify([{"prompt": prompt, "answer": "Blue."}] * 4)
    assert kind == "sft"
    assert "rendered prompt template" in warnings[0]


def random_value(rng: random.Random, depth: int = 0):
    choices = [None, 0, 1.5, True, "", "x", "What is it?", PROSE, "<|im_start|>user\nhi<|im_end|>" * 2]
    if depth < 2:
        choices += [
            [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))],
            {rng.choice(["role", "from", "content", "value", "text"]): random_value(rng, depth + 1)},
        ]
    return rng.choice(choices)


def test_random_rows_never_raise_and_stay_in_range():
    rng = random.Random(7)
    keys = ["text", "prompt", "response", "messages", "chosen", "id", "metadata", "q", "instruction", "output"]
    for _ in range(300):
        rows = [{k: random_value(rng) for k in rng.sample(keys, rng.randint(0, 4))} for _ in range(rng.randint(0, 6))]
        rows.append(rng.choice([None, "loose string", 3, []]))
        kind, conf, evidence, schema, warnings = classify(rows)
        assert kind in KINDS and 0.0 <= conf <= 1.0
        json.dumps([evidence, schema, warnings])


def test_exact_prompt_name_wins_over_a_word_match():
    rows = [{"query": "What is 2+2?", "response": "4, because 2+2=4.", "original_question": "2+2?", "type": "x"}] * 3
    _, _, _, schema, _ = classify(rows)
    assert (schema["prompt"], schema["response"], schema["meta"]) == (
        "query",
        "response",
        ["original_question", "type"],
    )


def test_system_prompt_column_is_mapped():
    rows = [
        {"id": "1", "system_prompt": "Be helpful.", "question": "Why is the sky blue?", "response": "Rayleigh."}
    ] * 3
    _, _, _, schema, _ = classify(rows)
    assert (schema["style"], schema["system"], schema["id"], schema["meta"]) == (
        "question_answer",
        "system_prompt",
        "id",
        [],
    )
