"""Reasoning a template does not render is inlined (``<think>\\n…\\n</think>\\n\\n`` + content); a template that
then cuts the content at ``</think>`` (DeepSeek V3.1, DeepSeek-R1's distills) would keep the ``\\n\\n`` the source
conversation does not have. Such a message is rendered with its own content only, and counted as reasoning the
template dropped."""

from __future__ import annotations

import chatkit as ck
import pytest
import stockkit as sk

pytest.importorskip("transformers")

NAME = "deepseek-ai-DeepSeek-V3.1.jinja"


def test_reasoning_cut_by_the_template_leaves_the_content_as_it_was(tmp_path):
    _, tok, hf = sk.toks_for(NAME, tmp_path / "tok")
    conv = ck.conv(("user", "What is 1 + 1?"), {"role": "assistant", "content": "2.", "reasoning": "1 + 1 = 2."},
                   ("user", "And 2 + 2?"), {"role": "assistant", "content": "4.", "reasoning": "2 + 2 = 4."},
                   cid="r")
    r, runs = sk.check_render(conv, NAME, tok, hf)
    assert runs == ["2.<｜end▁of▁sentence｜>", "4.<｜end▁of▁sentence｜>"]
    assert "<｜Assistant｜></think>2." in r.text and "\n\n" not in r.text
    assert r.stats["reasoning_dropped_by_template"] == 2 and r.stats["reasoning_trained_tokens"] == 0


def test_reasoning_a_template_keeps_is_still_inlined(tmp_path):
    """Phi-3.5 renders a message's content as it is: the inlined reasoning stays."""
    name = "microsoft-Phi-3.5-mini-instruct.jinja"
    _, tok, hf = sk.toks_for(name, tmp_path / "tok")
    conv = ck.conv(("user", "What is 1 + 1?"), {"role": "assistant", "content": "2.", "reasoning": "1 + 1 = 2."})
    r, runs = sk.check_render(conv, name, tok, hf)
    assert "<think>\n1 + 1 = 2.\n</think>\n\n2." in r.text and r.stats["reasoning_inlined"] == 1
    assert r.stats["reasoning_dropped_by_template"] == 0
