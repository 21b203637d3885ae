"""Templates that iterate `tools` unconditionally (Hermes, Command-R style) calibrate with a probe tool, and a
template no probe renders does not stop a run whose conversations do render."""

from __future__ import annotations

import json

import chatkit as ck
import pytest

from tokenmill.errors import TemplateError
from tokenmill.sft.render import render_conversation, shape_of
from tokenmill.sft.run import run_sft
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer

pytest.importorskip("transformers")

BODY = (
    "{%- for message in messages %}{%- if message.role == 'assistant' and message.tool_calls %}"
    "{{- '<|im_start|>assistant\n' }}{%- for call in message.tool_calls %}"
    "{{- '<tool_call>\n' + {'name': call.function.name, 'arguments': call.function.arguments}|tojson + "
    "'\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\n' }}"
    "{%- elif message.role == 'tool' %}{{- '<|im_start|>tool\n<tool_response>\n' + message.content + "
    "'\n</tool_response><|im_end|>\n' }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endif %}"
    "{%- endfor %}"
)
HERMES = ("{{- '<|im_start|>system\nYou are a function calling AI model. <tools> ' }}"
          "{%- for tool in tools %}{{- tool | tojson }}{%- endfor %}{{- ' </tools><|im_end|>\n' }}" + BODY)
PICKY = ("{%- if tools[0].function.name != 'search' %}{{- raise_exception('this template needs the search tool') }}"
         "{%- endif %}" + HERMES)
TOOLS = [{"type": "function", "function": {"name": "search", "description": "Search the web.",
                                           "parameters": {"type": "object", "properties": {}}}}]


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    d = ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))
    return d, load_tokenizer(d), ck.hf_tokenizer(d)


def _tool_conv(cid="t1"):
    return ck.conv(("user", "Find Paris"),
                   {"role": "assistant", "content": None,
                    "tool_calls": [{"id": "c1", "name": "search", "arguments": '{"q": "Paris"}'}]},
                   {"role": "tool", "content": "Paris is in France."}, ("assistant", "Paris is in France."),
                   tools=json.dumps(TOOLS), cid=cid)


def test_a_template_iterating_tools_calibrates_with_a_probe_tool(toks):
    _, tok, hf = toks
    template = load_template(HERMES)
    shape = shape_of(template, tok)
    assert shape.needs_tools and not shape.calibration_error
    assert shape.open.strip() == "<|im_start|>assistant" and shape.stop == "<|im_end|>"
    r = render_conversation(_tool_conv(), tokenizer=tok, template=template)
    assert r.ids.tolist() == ck.oracle_ids(hf, r, template.source)
    assert [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)] == [
        '<tool_call>\n{"name": "search", "arguments": {"q": "Paris"}}\n</tool_call><|im_end|>',
        "Paris is in France.<|im_end|>"]
    with pytest.raises(TemplateError, match="NoneType"):  # as apply_chat_template: no tools, no render
        render_conversation(ck.conv(("user", "hi"), ("assistant", "yo")), tokenizer=tok, template=template)


def test_a_calibration_failure_does_not_abort_a_run_whose_conversations_render(toks, tmp_path):
    d, tok, _ = toks
    template = load_template(PICKY)
    assert "renders no probe" in shape_of(template, tok).calibration_error
    src = tmp_path / "chats.jsonl"
    rows = [{"id": "t1", "tools": TOOLS, "messages": [
        {"role": "user", "content": "Find Paris"}, {"role": "assistant", "content": "Paris is in France."}]},
        {"id": "plain", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tpl = tmp_path / "picky.jinja"
    tpl.write_text(PICKY)
    m = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(d), chat_template=str(tpl), workers=1,
                progress=False)
    assert m["counts"]["kept"] == 1 and m["counts"]["rejected"] == {"template_error": 1}
    assert m["report"]["parity"]["checked"] == 1 and m["report"]["stop_token_trained"] == 1
