"""gpt-oss writes a tool call's name again in the tool result's header (``<|start|>functions.NAME to=assistant``):
the call's turn ends at its own end mark (``<|call|>``), not at that later copy of its text."""

from __future__ import annotations

import json

import chatkit as ck
import pytest
import stockkit as sk

pytest.importorskip("transformers")

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather.",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string", "description": "A city."}}}}}]


def test_gpt_oss_tool_call_turn_ends_at_its_call(tmp_path):
    name = "openai-gpt-oss-120b.jinja"
    _, tok, hf = sk.toks_for(name, tmp_path / "tok")
    conv = ck.conv(("user", "Weather in Paris?"),
                   {"role": "assistant", "content": None,
                    "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]},
                   {"role": "tool", "content": "Sunny."}, ("assistant", "It is sunny."), tools=json.dumps(TOOLS))
    _, runs = sk.check_render(conv, name, tok, hf)
    assert runs == [' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>',
                    "<|channel|>final<|message|>It is sunny.<|return|>"]
