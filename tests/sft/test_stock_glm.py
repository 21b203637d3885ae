"""GLM-4.6 writes no end-of-turn token: a turn ends at the next role token (``<|user|>``, ``<|observation|>``),
and the conversation's last reply at the end of the text. Its turns are masked like any other (the role token
that ends a turn is trained, the empty ``<think></think>`` it writes before a reply is not), the masks equal the
prefix-render reference also when the tokenizer has the think tags as control tokens (the reference's turn then
ends at its text, not at ``</think>``), and a run goes on."""

from __future__ import annotations

import json

import chatkit as ck
import pytest
import stockkit as sk

pytest.importorskip("transformers")

NAME = "GLM-4.6.jinja"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather.",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string", "description": "A city."}}}}}]
CONVS = [
    ck.conv(("user", "Hello there"), ("assistant", "Hi! How are you?"), ("user", "Fine."),
            ("assistant", "The answer is 42."), cid="two"),
    ck.conv(("user", "What is 1 + 1?"), {"role": "assistant", "content": "2.", "reasoning": "1 + 1 = 2."}, cid="r"),
    ck.conv(("user", "Weather in Paris?"),
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]},
            {"role": "tool", "content": "Sunny."}, ("assistant", "It is sunny."), tools=json.dumps(TOOLS),
            cid="tool"),
]


@pytest.fixture(params=[False, True], ids=["role-tokens", "think-tags-too"])
def toks(request, tmp_path):
    specials, bos, eos = sk.STOCK[NAME]
    if request.param:
        specials = [*specials, "<think>", "</think>"]
    d = ck.build_tokenizer_dir(tmp_path / "tok", chat_template=sk.stock_template(NAME), bos=bos, eos=eos,
                               specials=specials)
    from tokenmill.tokenize import load_tokenizer

    return d, load_tokenizer(d), ck.hf_tokenizer(d)


def test_glm_turns_end_at_the_next_role_token(toks):
    _, tok, hf = toks
    runs = {c["id"]: sk.check_render(c, NAME, tok, hf)[1] for c in CONVS}
    assert runs["two"] == ["Hi! How are you?<|user|>", "The answer is 42."]
    assert runs["r"] == ["\n<think>1 + 1 = 2.</think>\n2."]
    assert runs["tool"][0].endswith("</tool_call><|observation|>") and runs["tool"][1] == "It is sunny."


def test_a_glm_run_goes_on(toks, tmp_path):
    from tokenmill.sft.run import run_sft

    d, _, _ = toks
    src = tmp_path / "chats.jsonl"
    rows = [{"id": c["id"], **({"tools": TOOLS} if c["tools"] else {}),
             "messages": [{k: v for k, v in m.items() if v is not None} for m in c["messages"]]} for c in CONVS]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = run_sft([str(src)], out=tmp_path / "out", tokenizer=str(d), workers=1, progress=False)
    assert m["counts"]["kept"] == 3 and m["report"]["parity"]["real_differences"] == 0
    assert m["report"]["parity"]["mask_turns_checked"] >= 4
