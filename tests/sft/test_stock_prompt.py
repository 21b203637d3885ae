"""What is trained starts where the generation prompt ends: everything the model must emit after it is trained
(gpt-oss's channel header after ``<|start|>assistant``, Functionary's recipient after ``>>>``, Seed-OSS's opening
``<seed:think>``, the space after OpenChat's ``GPT4 Correct Assistant:`` before non-Latin text), and what the
prompt already holds is not, even when a turn writes it itself (``<think>\\n`` of QwQ, Nemotron, MiniMax-M2). A
``{% generation %}`` block that wraps the assistant header (SmolLM3) bounds what is trained, never widens it past
the header or the end mark. Each case: ids equal to transformers' and masks equal to the prefix-render reference
(stockkit.check_render)."""

from __future__ import annotations

import chatkit as ck
import pytest
import stockkit as sk

pytest.importorskip("transformers")

TWO_TURNS = ck.conv(("user", "Hello there"), ("assistant", "Hi! How are you?"), ("user", "Fine."),
                    ("assistant", "The answer is 42."), cid="two")
REASONING = ck.conv(("user", "What is 1 + 1?"), {"role": "assistant", "content": "2.", "reasoning": "1 + 1 = 2."},
                    ("user", "And 2 + 2?"), {"role": "assistant", "content": "4.", "reasoning": "2 + 2 = 4."},
                    cid="reasoning")


def _runs(name, conv, tmp_path, **policy):
    _, tok, hf = sk.toks_for(name, tmp_path / "tok")
    return sk.check_render(conv, name, tok, hf, **policy)[1]


def test_gpt_oss_channel_header_is_trained(tmp_path):
    assert _runs("openai-gpt-oss-120b.jinja", TWO_TURNS, tmp_path) == [
        "<|channel|>final<|message|>Hi! How are you?<|end|>",
        "<|channel|>final<|message|>The answer is 42.<|return|>"]
    assert _runs("openai-gpt-oss-120b.jinja", REASONING, tmp_path)[-1] == (
        "<|channel|>analysis<|message|>2 + 2 = 4.<|end|><|start|>assistant<|channel|>final<|message|>4.<|return|>")


def test_functionary_recipient_is_trained(tmp_path):
    assert _runs("meetkai-functionary-medium-v3.2.jinja", TWO_TURNS, tmp_path) == [
        "all\nHi! How are you?<|eot_id|>", "all\nThe answer is 42.<|eot_id|>"]


def test_openchat_space_before_non_latin_text_is_trained(tmp_path):
    name = "openchat-openchat-3.5-0106.jinja"
    _, tok, hf = sk.toks_for(name, tmp_path / "tok")
    r, runs = sk.check_render(ck.conv(("user", "Hello there"), ("assistant", "你好!"), cid="zh"), name, tok, hf)
    assert runs == [" 你好!<|end_of_turn|>"]
    first = int(r.mask.argmax())
    assert hf.decode(r.ids[first : first + 1].tolist()) == " "  # a token of its own, trained


def test_seed_oss_opening_think_is_trained(tmp_path):
    assert _runs("ByteDance-Seed-OSS.jinja", REASONING, tmp_path) == [
        "<seed:think>1 + 1 = 2.</seed:think>\n2.<seed:eos>", "<seed:think>2 + 2 = 4.</seed:think>\n4.<seed:eos>"]


@pytest.mark.parametrize(("name", "stop"), [("Qwen-QwQ-32B.jinja", "<|im_end|>"),
                                            ("NVIDIA-Nemotron-Nano-v2.jinja", "\n<SPECIAL_12>"),
                                            ("MiniMax-M2.jinja", "[e~[")])
def test_think_opening_held_by_the_prompt_is_not_trained(tmp_path, name, stop):
    """Nemotron writes ``<think>\\n`` after the last turn's header itself; QwQ and MiniMax-M2 render the last turn's
    inlined reasoning, whose ``<think>\\n`` the generation prompt already holds."""
    runs = _runs(name, TWO_TURNS, tmp_path)
    assert runs == [f"Hi! How are you?{stop}", f"The answer is 42.{stop}"], runs
    if name != "NVIDIA-Nemotron-Nano-v2.jinja":
        runs = _runs(name, REASONING, tmp_path)
        assert runs[-1] == f"2 + 2 = 4.\n</think>\n\n4.{stop}", runs


def test_generation_block_wrapping_the_header_trains_no_header(tmp_path):
    name = "HuggingFaceTB-SmolLM3-3B.jinja"
    assert _runs(name, TWO_TURNS, tmp_path) == ["Hi! How are you?<|im_end|>", "The answer is 42.<|im_end|>"]
