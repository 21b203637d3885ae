"""Disguised data: transcripts in a text column, web pages in an SFT layout."""

from __future__ import annotations

import pytest
from route_samples import PROSE, WEB_PAGE

from tokenmill.route import classify_rows
from tokenmill.route.content import transcript_markers, turn_count

PAIRS = [(f"What is {i} plus {i}?", f"{i} plus {i} is {2 * i}.") for i in range(12)]


def chatml(q, a):
    return (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n{a}<|im_end|>\n"
    )


def alpaca(q, a):
    return f"Below is an instruction that describes a task.\n\n### Instruction:\n{q}\n\n### Response:\n{a}"


def human_assistant(q, a):
    return f"Human: {q}\nAssistant: {a}\nHuman: thanks\nAssistant: You are welcome."


def user_assistant(q, a):
    return f"User: {q}\n\nAssistant: {a}"


def llama3(q, a):
    return (
        f"<|start_header_id|>user<|end_header_id|>\n\n{q}<|eot_id|>"
        f"<|start_header_id|>assistant<|end_header_id|>\n\n{a}<|eot_id|>"
    )


def inst(q, a):
    return f"<s>[INST] {q} [/INST] {a}</s>"


@pytest.mark.parametrize(
    ("render", "marker"),
    [
        (chatml, "chatml"),
        (alpaca, "alpaca"),
        (human_assistant, "speaker_lines"),
        (user_assistant, "speaker_lines"),
        (llama3, "llama3"),
        (inst, "inst"),
    ],
)
def test_transcripts_in_a_text_column_are_sft(render, marker):
    rows = [{"text": render(q, a), "id": str(i)} for i, (q, a) in enumerate(PAIRS)]
    kind, conf, ev, schema, warnings = classify_rows(rows, format="jsonl")
    assert (kind, conf, ev["transcripts"]) == ("sft", 1.0, len(rows))
    assert (schema["record"], schema["style"], schema["text"], schema["id"]) == (
        "Conversation",
        "rendered_text",
        "text",
        "id",
    )
    assert schema["markers"][0] == marker
    assert len(warnings) == 1 and "SFT data in a pretraining costume" in warnings[0]


def test_transcripts_in_plain_text_format():
    rows = [{"text": chatml(q, a)} for q, a in PAIRS[:4]] + [{"text": PROSE}] * 4
    kind, conf, _, _, _ = classify_rows(rows, format="text")
    assert (kind, conf) == ("sft", 0.5)


def test_a_few_transcripts_below_the_threshold_stay_pretrain_with_a_warning():
    rows = [{"text": chatml(q, a)} for q, a in PAIRS[:2]] + [{"text": PROSE}] * 8
    kind, conf, _, schema, warnings = classify_rows(rows, format="jsonl")
    assert (kind, conf, schema["record"]) == ("pretrain", 0.8, "Document")
    assert "2 of 10 documents look like chat transcripts" in warnings[0]


def test_prose_quoting_one_speaker_is_not_a_transcript():
    text = PROSE + "\nUser: the manual says to restart.\n" + PROSE + "\nNote: this is fine.\n"
    assert turn_count(transcript_markers(text)) == 0
    kind, _, _, _, _ = classify_rows([{"text": text}] * 5, format="jsonl")
    assert kind == "pretrain"


def test_web_pages_as_alpaca_outputs_with_empty_instructions_are_pretrain():
    rows = [{"instruction": "", "input": "", "output": WEB_PAGE}] * 9 + [
        {"instruction": "Hi", "input": "", "output": "Hello"}
    ]
    kind, conf, ev, schema, warnings = classify_rows(rows, format="json")
    assert (kind, conf) == ("pretrain", 0.9)
    assert (ev["empty_prompt"], ev["web_pages"]) == (9, 9)
    assert (schema["record"], schema["text"]) == ("Document", "output")
    assert "responses look like whole web pages with empty prompts" in warnings[0]


def test_long_documents_as_completions_with_empty_prompts_are_pretrain():
    rows = [{"prompt": "", "completion": PROSE * 3} for _ in range(6)]
    kind, _, _, schema, warnings = classify_rows(rows, format="jsonl")
    assert (kind, schema["text"]) == ("pretrain", "completion")
    assert "0 with web boilerplate" in warnings[0]


def test_web_pages_as_lone_assistant_turns_are_unknown():
    rows = [{"messages": [{"role": "assistant", "content": WEB_PAGE}]}] * 5
    kind, _, _, _, warnings = classify_rows(rows, format="jsonl")
    assert kind == "unknown"
    assert "fits neither track" in warnings[0]


def test_short_answers_to_empty_prompts_stay_sft():
    rows = [{"prompt": "", "completion": "ok"}] * 3 + [{"prompt": "Say ok", "completion": "ok"}] * 3
    kind, conf, _, _, _ = classify_rows(rows, format="jsonl")
    assert (kind, conf) == ("sft", 0.5)


def test_guanaco_style_turns_on_one_line():
    rows = [{"text": f"### Human: {q}### Assistant: {a}### Human: ok?### Assistant: yes"} for q, a in PAIRS]
    kind, _, _, schema, _ = classify_rows(rows, format="jsonl")
    assert (kind, schema["markers"]) == ("sft", ["alpaca"])
