"""Every stock template of tests/sft/templates on conversations of each shape it renders (plain, system, reasoning,
tool calls): ids equal to transformers' ``apply_chat_template`` and masks equal to the prefix-render reference.
A conversation a template cannot render (it names no tools, or drops tool calls) is rejected with its reason,
never written wrong."""

from __future__ import annotations

import json

import chatkit as ck
import pytest
import stockkit as sk

from tokenmill.errors import TemplateError

pytest.importorskip("transformers")

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather.",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string", "description": "A city."}}}}}]
CONVS = [
    ck.conv(("user", "Hello there"), ("assistant", "Hi! How are you?"), ("user", "Fine."),
            ("assistant", "The answer is 42."), cid="plain"),
    ck.conv(("system", "Be brief."), ("user", "Hello there"), ("assistant", "Hi!"), cid="system"),
    ck.conv(("user", "What is 1 + 1?"), {"role": "assistant", "content": "2.", "reasoning": "1 + 1 = 2."},
            ("user", "And 2 + 2?"), {"role": "assistant", "content": "4.", "reasoning": "2 + 2 = 4."},
            cid="reasoning"),
    ck.conv(("user", "Weather in Paris?"),
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call00001", "name": "get_weather", "arguments": '{"city": "Paris"}'}]},
            {"role": "tool", "content": "Sunny, 21 C.", "tool_call_id": "call00001", "name": "get_weather"},
            ("assistant", "It is sunny in Paris."), tools=json.dumps(TOOLS), cid="tool"),
]
# the conversations a template itself cannot render: it names no tools or no system role, drops tool calls, needs
# a tool list (a template reading a tool call's arguments as a string or its content as text renders it in that
# form: Functionary v3.2, DeepSeek V3.1 and the R1 distills, QwQ, Qwen3, Devstral)
UNRENDERED = {
    "ibm-granite-granite-3.3-2B-Instruct.jinja": {"tool"}, "microsoft-Phi-3.5-mini-instruct.jinja": {"tool"},
    "open-instruct-simple_chat.jinja": {"tool"}, "open-instruct-olmo.jinja": {"tool"},
    "HuggingFaceTB-SmolLM3-3B.jinja": {"tool"}, "openchat-openchat-3.5-0106.jinja": {"tool"},
    "google-gemma-2-2b-it.jinja": {"system", "tool"},
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": {"plain", "system", "reasoning"},
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": {"plain", "system", "reasoning"},
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": {"plain", "system", "reasoning"},
    "LFM2-8B-A1B.jinja": {"tool"},
    "LFM2.5-Instruct.jinja": {"tool"},
    # builds its tool-call list with `list.append`, which the sandbox (transformers' too) refuses
    "Kimi-K2-Thinking.jinja": {"tool"},
}


@pytest.mark.parametrize("name", sorted(sk.STOCK))
def test_stock_template(tmp_path, name):
    _, tok, hf = sk.toks_for(name, tmp_path / "tok")
    for conv in CONVS:
        if conv["id"] in UNRENDERED.get(name, ()):
            with pytest.raises(TemplateError) as info:
                sk.check_render(conv, name, tok, hf)
            assert info.value.reason in ("template_error", "assistant_not_rendered"), (name, conv["id"])
            continue
        r, runs = sk.check_render(conv, name, tok, hf)
        assert len(runs) >= 1 and r.stats["trained_turns"] == r.stats["assistant_turns"], (name, conv["id"])
