"""Loss masks against an independent reference: the tokens each assistant message adds to transformers'
``apply_chat_template`` render, minus the header its generation prompt writes (:mod:`tokenmill.sft.maskref`).
The real Hermes-3 tool-use template (fixtures/hermes3_tool_use.jinja) after a tool turn writes
``<|im_end|><|im_start|>assistant\\n`` with no newline between the turns: the ``\\n`` is header, never trained."""

from __future__ import annotations

import json
from pathlib import Path

import chatkit as ck
import pytest

from tokenmill.sft.maskref import mask_differences
from tokenmill.sft.render import render_conversation
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer

pytest.importorskip("transformers")

HERMES3 = Path(__file__).parent / "fixtures" / "hermes3_tool_use.jinja"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather.",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string", "description": "A city."}}}}}]


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    d = ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"), bos="<|begin_of_text|>", eos="<|im_end|>")
    return load_tokenizer(d), ck.hf_tokenizer(d)


def _call(cid):
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "name": "get_weather", "arguments": '{"city": "Paris"}'}]}


def _tool_conversations():
    tools = json.dumps(TOOLS)
    return [
        ck.conv(("user", "Weather in Paris?"), _call("c1"), {"role": "tool", "content": "Sunny, 21 C."},
                ("assistant", "It is sunny in Paris."), tools=tools, cid="one-tool"),
        ck.conv(("system", "Be brief."), ("user", "Weather?"), _call("c1"), {"role": "tool", "content": "Rain."},
                {"role": "tool", "content": "Wind."}, ("assistant", "Rain and wind."), ("user", "Thanks"),
                ("assistant", "You are welcome."), tools=tools, cid="two-tools"),
        ck.conv(("user", "Weather?"), _call("c1"), {"role": "tool", "content": "Sunny."}, _call("c2"),
                {"role": "tool", "content": "Cloudy."}, ("assistant", "Sunny, then cloudy."), tools=tools,
                cid="chained"),
    ]


def _controls(hf):
    return sorted({str(t) for t in hf.added_tokens_decoder.values() if t.special}, key=len, reverse=True)


def test_hermes3_tool_use_masks_match_the_reference(toks):
    tok, hf = toks
    template = load_template(HERMES3)
    for conv in _tool_conversations():
        r = render_conversation(conv, tokenizer=tok, template=template)
        assert r.ids.tolist() == ck.oracle_ids(hf, r, template.source), conv["id"]
        assert mask_differences(hf, r, template.source, _controls(hf)) == [], conv["id"]
        runs = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
        assert all(not run.startswith("\n") for run in runs), (conv["id"], runs)


def test_the_reference_sees_a_header_newline_trained(toks):
    """The reference is able to fail: the same render with the header's newline trained is reported."""
    tok, hf = toks
    template = load_template(HERMES3)
    r = render_conversation(_tool_conversations()[0], tokenizer=tok, template=template)
    at = r.text.rindex("<|im_start|>assistant\n") + len("<|im_start|>assistant")
    enc = hf(r.text, add_special_tokens=False, return_offsets_mapping=True)
    k = next(j for j, (a, b) in enumerate(enc["offset_mapping"]) if a <= at < b)
    r.mask[k] = True
    (line,) = mask_differences(hf, r, template.source, _controls(hf))
    assert "('\\n') is trained, the reference says not trained" in line


@pytest.mark.parametrize("name", ["LLAMA3", "GENERATION", "GEMMA", "LLAMA2", "MISTRAL"])
def test_family_templates_masks_match_the_reference(tmp_path, name):
    d = ck.build_tokenizer_dir(tmp_path / "tok", specials=ck.FAMILY_SPECIALS)
    tok, hf = load_tokenizer(d), ck.hf_tokenizer(d)
    template = load_template(getattr(ck, name))
    conv = ck.conv(("user", "Hello there"), ("assistant", "Hi! How are you?"), ("user", "Fine."),
                   ("assistant", "The answer is 42."))
    r = render_conversation(conv, tokenizer=tok, template=template)
    assert mask_differences(hf, r, template.source, _controls(hf)) == []


def test_a_run_checks_masks_against_the_reference(tmp_path):
    from tokenmill.sft.run import run_sft

    d = ck.build_tokenizer_dir(tmp_path / "tok", bos="<|begin_of_text|>", eos="<|im_end|>")
    src = tmp_path / "tools.jsonl"
    rows = [{"id": c["id"], "tools": TOOLS, "messages": [{k: v for k, v in m.items() if v is not None}
                                                          for m in c["messages"]]} for c in _tool_conversations()]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(d), chat_template=str(HERMES3), workers=1,
                progress=False)
    parity = m["report"]["parity"]
    assert m["counts"]["kept"] == 3 and parity["real_differences"] == 0
    assert parity["mask_turns_checked"] == 8  # every assistant turn of the three conversations


def test_two_tokenizers_of_one_vocabulary_with_other_special_tokens_get_their_own_reference(tmp_path):
    """The process's references (and the cached verdicts) are keyed by the special tokens too: a run with the
    same vocabulary but another BOS is checked against its own reference, not the first run's."""
    from tokenmill.sft.run import run_sft

    src = tmp_path / "tools.jsonl"
    rows = [{"id": c["id"], "tools": TOOLS, "messages": [{k: v for k, v in m.items() if v is not None}
                                                          for m in c["messages"]]} for c in _tool_conversations()]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for k, bos in enumerate(("<s>", "<|begin_of_text|>")):  # the same trained vocabulary, two BOS tokens
        d = ck.build_tokenizer_dir(tmp_path / f"tok{k}", bos=bos, eos="<|im_end|>")
        m = run_sft([str(src)], out=tmp_path / f"out{k}", tokenizer=str(d), chat_template=str(HERMES3), workers=1,
                    progress=False)
        assert m["counts"]["kept"] == 3 and m["report"]["parity"]["real_differences"] == 0
