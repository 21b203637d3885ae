"""Turn-aware truncation keeps the system message and the final exchange, or rejects as too_long."""

from __future__ import annotations

import chatkit as ck
import pytest

from tokenmill.errors import TemplateError
from tokenmill.sft.render import render_conversation
from tokenmill.sft.template import load_template
from tokenmill.sft.truncate import exchanges, fit_conversation
from tokenmill.tokenize import load_tokenizer


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    d = ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))
    return load_tokenizer(d), ck.hf_tokenizer(d)


def long_conv(n=6):
    turns = [("system", "Be nice.")]
    for i in range(n):
        turns += [("user", f"Question {i}: tell me about the quick brown fox."),
                  ("assistant", f"Answer {i}: the quick brown fox jumps over the lazy dog.")]
    return ck.conv(*turns)


def test_exchanges_group_user_with_answers():
    c = ck.conv(("system", "s"), ("user", "u"), ("assistant", "a"), ("tool", "t"), ("assistant", "b"),
                ("user", "v"), ("assistant", "c"))
    assert exchanges(c["messages"]) == ([0], [[1, 2, 3, 4], [5, 6]])


def test_fits_without_change(toks):
    tok, _ = toks
    r = fit_conversation(long_conv(2), max_length=10_000, tokenizer=tok, template=load_template())
    assert r.stats["truncated_exchanges"] == 0 and r.stats["supervised_tokens_lost"] == 0


def test_drops_oldest_exchanges_keeps_system_and_final(toks):
    tok, hf = toks
    c = long_conv(6)
    template = load_template()
    full = render_conversation(c, tokenizer=tok, template=template)
    limit = len(full.ids) // 2
    r = fit_conversation(c, max_length=limit, tokenizer=tok, template=template)
    assert len(r.ids) <= limit
    kept = [m["content"] for m in r.messages]
    assert kept[0] == "Be nice." and kept[-1] == "Answer 5: the quick brown fox jumps over the lazy dog."
    assert "Question 0: tell me about the quick brown fox." not in kept
    n = r.stats["truncated_exchanges"]
    assert n >= 1 and kept[1] == f"Question {n}: tell me about the quick brown fox."
    # minimal: keeping one more exchange would not fit
    one_more = {**c, "messages": [c["messages"][0]] + c["messages"][1 + 2 * (n - 1):]}
    assert len(render_conversation(one_more, tokenizer=tok, template=template).ids) > limit
    assert r.stats["supervised_tokens_lost"] == full.stats["trained_tokens"] - r.stats["trained_tokens"] > 0
    assert r.ids.tolist() == ck.oracle_ids(hf, r, template.source)
    assert hf.decode(ck.trained_runs(r.ids, r.mask)[-1]).endswith("lazy dog.<|im_end|>")


def test_rejects_when_final_exchange_alone_is_too_long(toks):
    tok, _ = toks
    with pytest.raises(TemplateError) as info:
        fit_conversation(long_conv(3), max_length=12, tokenizer=tok, template=load_template())
    assert info.value.reason == "too_long" and "max_length=12" in str(info.value)
