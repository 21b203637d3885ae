"""InternLM2's tool-call format (vLLM's template) renders a call's arguments with ``|string``: Python's
``str(dict)``, whose strings escape the private-use sentinels that locate message texts. The escaped sentinels
are read as sentinels, so tool-call conversations are masked like any other instead of rejected as
``spans_unresolved``; a message that types such an escape itself is refused."""

from __future__ import annotations

import json

import chatkit as ck
import pytest
import stockkit as sk

from tokenmill.errors import TemplateError
from tokenmill.sft.render import render_conversation, shape_of
from tokenmill.sft.template import load_template

pytest.importorskip("transformers")

NAME = "vllm-tool_chat_template_internlm2_tool.jinja"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather.",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string", "description": "A city."}}}}}]
CALL = ck.conv(("user", "Weather in Paris?"),
               {"role": "assistant", "content": "Let me look.",
                "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'}]},
               {"role": "tool", "content": "Sunny."}, ("assistant", "It is sunny."), tools=json.dumps(TOOLS),
               cid="call")


def test_arguments_passed_through_string_are_located(tmp_path):
    _, tok, hf = sk.toks_for(NAME, tmp_path / "tok")
    assert shape_of(load_template(sk.stock_template(NAME)), tok).faithful
    r, runs = sk.check_render(CALL, NAME, tok, hf)
    assert runs == ["Let me look.<|action_start|><|plugin|>\n{\"name\": \"get_weather\", \"arguments\": "
                    "{'city': 'Paris', 'days': 2}}<|action_end|><|im_end|>", "It is sunny.<|im_end|>"]


def test_a_run_keeps_tool_call_conversations(tmp_path):
    from tokenmill.sft.run import run_sft

    d, _, _ = sk.toks_for(NAME, tmp_path / "tok")
    src = tmp_path / "calls.jsonl"
    src.write_text(json.dumps({"id": "call", "tools": TOOLS, "messages": [
        {k: v for k, v in m.items() if v is not None} for m in CALL["messages"]]}) + "\n")
    m = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(d), workers=1, progress=False)
    assert m["counts"]["kept"] == 1 and not m["counts"].get("rejected")
    assert m["report"]["parity"]["mask_turns_checked"] == 2


def test_a_typed_sentinel_escape_is_refused(tmp_path):
    _, tok, _ = sk.toks_for(NAME, tmp_path / "tok")
    conv = ck.conv(("user", "what is \\U000f0000\\U00100002?"), ("assistant", "A private-use escape."))
    with pytest.raises(TemplateError) as info:
        render_conversation(conv, tokenizer=tok, template=load_template(sk.stock_template(NAME)))
    assert info.value.reason == "sentinel_collision"
