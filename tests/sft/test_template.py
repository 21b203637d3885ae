"""Chat-template loading and rendering, against transformers' own renderer."""

from __future__ import annotations

import json

import pytest

from tokenmill.errors import TemplateError
from tokenmill.sft.template import CHATML, ChatTemplate, load_template, render_template

transformers_ctu = pytest.importorskip("transformers.utils.chat_template_utils")

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "name": "get_weather", "content": '{"temp": 21}'},
    {"role": "assistant", "content": "21 °C.", "reasoning_content": "The tool said 21."},
]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]

GOLDEN = (
    "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query."
    "\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}\n</tools>\n\n'
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call>"
    ' XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    "<|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n<think>\nThe tool said 21.\n</think>\n\n21 °C.<|im_end|>\n"
)


def test_builtin_chatml_golden_string():
    text, _ = render_template(load_template(), MESSAGES, tools=TOOLS)
    assert text == GOLDEN


def test_builtin_chatml_without_tools_or_system():
    text, _ = render_template(load_template("chatml"), [{"role": "user", "content": "Hi"},
                                                        {"role": "assistant", "content": "Hello"}])
    assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n"


@pytest.mark.parametrize(
    "source",
    [
        CHATML,
        "{{ bos_token }}{% for m in messages %}{{ m.content | tojson(indent=2) }}{{ m | tojson(ensure_ascii=True) }}"
        "{% if loop.index > 1 %}{% break %}{% endif %}{% endfor %}{{ eos_token }}",
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}"
        "{{ dict(a=1) | tojson(sort_keys=True) }}",
        # attribute lookups on message dicts (the sandbox's getattr fast path): keys, missing keys, dict methods,
        # a mutating method (unsafe in the immutable sandbox), nested dicts
        "{% for m in messages %}{{ m.role }}|{{ m.missing }}|{{ m.missing is defined }}|{{ m.tool_calls is defined }}"
        "|{{ m.get('role') }}|{{ m.get('nope', 'dflt') }}|{{ 'role' in m.keys() }}|{{ m.items is defined }}"
        "|{{ m.update is defined }}|{{ m.missing or 'x' }}|{{ m.tool_calls[0].function.name if m.tool_calls }}"
        "|{{ m['content'] }}|{{ m.content.strip() }}\n{% endfor %}{{ tools[0].function.parameters.type }}",
    ],
)
def test_render_matches_transformers_renderer(source):
    ours, _ = render_template(ChatTemplate(source), MESSAGES, tools=TOOLS,
                              special_tokens={"bos_token": "<s>", "eos_token": "</s>"})
    theirs, _ = transformers_ctu.render_jinja_template([MESSAGES], tools=TOOLS, chat_template=source,
                                                       bos_token="<s>", eos_token="</s>")
    assert ours == theirs[0]


def test_generation_spans_match_transformers():
    source = ("{% for m in messages %}{{ m.role }}: {% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
              "{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}")
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "bb"},
            {"role": "user", "content": "c"}, {"role": "assistant", "content": "dd"}]
    text, spans = render_template(ChatTemplate(source), msgs, track_generation=True)
    ref_text, ref_spans = transformers_ctu.render_jinja_template([msgs], chat_template=source,
                                                                 return_assistant_tokens_mask=True)
    assert (text, spans) == (ref_text[0], ref_spans[0])
    assert [text[a:b] for a, b in spans] == ["bb", "dd"]


def test_raise_exception_names_record():
    source = "{{ raise_exception('roles must alternate') }}"
    with pytest.raises(TemplateError, match=r"record conv-7:.*roles must alternate") as info:
        render_template(ChatTemplate(source), MESSAGES, record_id="conv-7")
    assert info.value.reason == "template_error"


def test_sandbox_blocks_attribute_escape():
    with pytest.raises(TemplateError, match="record x"):
        render_template(ChatTemplate("{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}"),
                        MESSAGES, record_id="x")


def test_load_from_tokenizer_config_variants(tmp_path):
    plain = tmp_path / "a" / "tokenizer_config.json"
    plain.parent.mkdir()
    plain.write_text(json.dumps({"chat_template": "{{ 'A' }}"}))
    named = tmp_path / "b.json"
    named.write_text(json.dumps({"chat_template": [{"name": "tool_use", "template": "{{ 'T' }}"},
                                                    {"name": "default", "template": "{{ 'D' }}"}]}))
    jinja = tmp_path / "c" / "chat_template.jinja"
    jinja.parent.mkdir()
    jinja.write_text("{{ 'J' }}")
    loose = tmp_path / "d.txt"
    loose.write_text("{{ 'P' }}")
    assert load_template(plain).source == "{{ 'A' }}"
    assert load_template(plain.parent).source == "{{ 'A' }}"
    assert load_template(named).source == "{{ 'D' }}"
    assert load_template(named, name="tool_use").source == "{{ 'T' }}"
    assert load_template(jinja.parent).source == "{{ 'J' }}"
    assert load_template(loose).source == "{{ 'P' }}"
    assert load_template("{{ 'S' }}").origin == "string"


def test_load_from_tokenizer_object_and_errors(tmp_path):
    class Tok:
        chat_template = "{{ 'X' }}"

    assert load_template(Tok()).source == "{{ 'X' }}"
    Tok.chat_template = None
    with pytest.raises(TemplateError, match="no chat template"):
        load_template(Tok())
    with pytest.raises(TemplateError, match="not found"):
        load_template(tmp_path / "missing.jinja")
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"chat_template": [{"name": "x", "template": "{{ 1 }}"}]}))
    with pytest.raises(TemplateError, match="no chat template named 'default'"):
        load_template(bad)


def test_digest_is_stable_and_content_based():
    assert load_template().digest == ChatTemplate(CHATML, origin="elsewhere").digest
    assert load_template().digest != ChatTemplate(CHATML + " ").digest
