"""Masks from one render: ids equal transformers' apply_chat_template ids, trained tokens decode to exactly the
assistant outputs plus their end-of-turn markers, on a tiny BPE trained here."""

from __future__ import annotations

import pickle

import chatkit as ck
import numpy as np
import pytest

from tokenmill.errors import ConfigError, TemplateError
from tokenmill.sft.parity import check_parity
from tokenmill.sft.render import MaskPolicy, render_conversation
from tokenmill.sft.template import ChatTemplate, load_template
from tokenmill.tokenize import load_tokenizer

pytest.importorskip("transformers")

ZEPHYR = ("{% for m in messages %}{{ '<|' + m['role'] + '|>\n' + m['content'] + eos_token + '\n' }}{% endfor %}")
TEMPLATES = {"chatml": None, "llama3": ck.LLAMA3, "mistral": ck.MISTRAL, "generation": ck.GENERATION,
             "qwen3": ck.QWEN3, "zephyr": ZEPHYR}
STOPS = {"chatml": "<|im_end|>", "llama3": "<|eot_id|>", "mistral": "</s>", "generation": "<|im_end|>",
         "qwen3": "<|im_end|>", "zephyr": "</s>"}


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    d = ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))
    return load_tokenizer(d), ck.hf_tokenizer(d)


def render(tok, c, name="chatml", **kw):
    return render_conversation(c, tokenizer=tok, template=load_template(TEMPLATES[name]), policy=MaskPolicy(**kw))


def decoded_runs(hf, r):
    return [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]


def three_turns(**last):
    return ck.conv(("system", "Be nice."), ("user", "Hello there"), ("assistant", "Hi! How are you?"),
                   ("user", "Repeat: the answer is 42"), ("assistant", "the answer is 42"),
                   ("user", "What is 1 + 1?"), {"role": "assistant", "content": "2", **last})


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_ids_match_oracle_and_trained_tokens_are_the_outputs(toks, name):
    tok, hf = toks
    c = three_turns()
    r = render(tok, c, name)
    assert r.ids.tolist() == ck.oracle_ids(hf, r, load_template(TEMPLATES[name]).source)
    lead = " " if name == "mistral" else ""  # `' ' + content` merges into the content's first token
    stop = STOPS[name]
    assert decoded_runs(hf, r) == [f"{lead}Hi! How are you?{stop}", f"{lead}the answer is 42{stop}", f"{lead}2{stop}"]
    assert r.stats["stop_token_trained"] and r.stats["trained_turns"] == 3
    assert r.stats["trained_tokens"] == int(r.mask.sum()) == sum(r.stats["trained_by_turn"])
    assert check_parity(c, r, hf, load_template(TEMPLATES[name])) is None


def test_train_on_last_and_all(toks):
    tok, hf = toks
    last = render(tok, three_turns(), train_on="last")
    assert decoded_runs(hf, last) == ["2<|im_end|>"]
    everything = render(tok, three_turns(), train_on="all")
    assert everything.mask.all() and everything.stats["trained_by_role"]["other"] > 0
    with pytest.raises(ConfigError, match="train_on"):
        render(tok, three_turns(), train_on="users")


def test_weights_zero_untrained_other_values_recorded(toks):
    tok, hf = toks
    c = three_turns()
    c["messages"][2]["weight"] = 0.0
    c["messages"][4]["weight"] = 2.5
    r = render(tok, c)
    assert decoded_runs(hf, r) == ["the answer is 42<|im_end|>", "2<|im_end|>"]
    assert set(np.unique(r.weights[r.mask]).tolist()) == {1.0, 2.5}
    assert not r.weights[~r.mask].any()
    assert render(tok, three_turns()).weights is None


def test_empty_think_not_supervised_unless_asked(toks):
    tok, hf = toks
    r = render(tok, three_turns(), "qwen3")  # Qwen3-style writes <think>\n\n</think>\n\n for the last turn
    assert "<think>\n\n</think>\n\n2" in r.text
    assert decoded_runs(hf, r)[-1] == "2<|im_end|>"
    assert r.stats["empty_think_unsupervised"] == 1
    asked = render(tok, three_turns(), "qwen3", supervise_empty_think=True)
    assert decoded_runs(hf, asked)[-1] == "<think>\n\n</think>\n\n2<|im_end|>"


def test_history_reasoning_dropped_by_template_still_masks_what_is_rendered(toks):
    tok, hf = toks
    c = three_turns(reasoning="1 and 1 make 2.")
    c["messages"][2]["reasoning"] = "Greet back."
    r = render(tok, c, "qwen3")
    assert r.ids.tolist() == ck.oracle_ids(hf, r, ck.QWEN3)
    assert "Greet back." not in r.text
    assert decoded_runs(hf, r) == ["Hi! How are you?<|im_end|>", "the answer is 42<|im_end|>",
                                   "<think>\n1 and 1 make 2.\n</think>\n\n2<|im_end|>"]
    assert r.stats["reasoning_dropped_by_template"] == 1
    assert r.stats["reasoning_trained_tokens"] > 0 and r.stats["answer_trained_tokens"] > 0


def test_train_reasoning_false_trains_answer_only(toks):
    tok, hf = toks
    r = render(tok, three_turns(reasoning="1 and 1 make 2."), train_reasoning=False)
    assert "<think>\n1 and 1 make 2.\n</think>\n\n2" in r.text
    assert decoded_runs(hf, r)[-1] == "2<|im_end|>"
    assert r.stats["reasoning_trained_tokens"] == 0


@pytest.mark.parametrize("policy", ["inline", "drop", "reject"])
def test_reasoning_the_template_does_not_render(toks, policy):
    tok, hf = toks
    c = three_turns(reasoning="1 and 1 make 2.")
    if policy == "reject":
        with pytest.raises(TemplateError) as info:
            render(tok, c, "llama3", reasoning_policy=policy)
        assert info.value.reason == "reasoning_not_rendered" and "record c1" in str(info.value)
        return
    r = render(tok, c, "llama3", reasoning_policy=policy)
    assert r.ids.tolist() == ck.oracle_ids(hf, r, ck.LLAMA3)
    if policy == "inline":
        assert decoded_runs(hf, r)[-1] == "<think>\n1 and 1 make 2.\n</think>\n\n2<|eot_id|>"
        assert r.stats["reasoning_inlined"] == 1 and r.stats["reasoning_trained_tokens"] > 0
    else:
        assert "1 and 1" not in r.text and r.stats["reasoning_dropped"] == 1


def test_literal_control_tokens_are_neutralised_and_counted(toks):
    tok, hf = toks
    c = ck.conv(("user", "Say <|im_end|> twice: <|im_end|>"), ("assistant", "<|im_end|> is a token"))
    r = render(tok, c)
    im_end = tok.special_tokens["<|im_end|>"]
    assert int((r.ids == im_end).sum()) == 2  # only the template's own two
    assert r.stats["control_tokens_neutralised"] == 3
    assert decoded_runs(hf, r) == ["<|im_end|> is a token<|im_end|>"]
    assert hf.decode(r.ids.tolist()) == r.text
    assert "exempt" in check_parity(c, r, hf, load_template())


def test_tool_calls_trained_tool_results_not(toks):
    tok, hf = toks
    c = ck.conv(
        ("user", "Weather in Paris?"),
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]},
        {"role": "tool", "content": '{"temp": 21}', "name": "get_weather"},
        ("assistant", "It is 21 degrees."),
        tools='[{"type": "function", "function": {"name": "get_weather"}}]',
    )
    r = render(tok, c)
    assert r.ids.tolist() == ck.oracle_ids(hf, r, load_template().source)
    assert decoded_runs(hf, r) == [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
        "It is 21 degrees.<|im_end|>",
    ]


def test_unlocatable_assistant_is_a_reject(toks):
    tok, _ = toks
    drops = ChatTemplate("{% for m in messages %}{% if m.role != 'assistant' or loop.last %}"
                         "{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endif %}{% endfor %}")
    with pytest.raises(TemplateError) as info:
        render_conversation(three_turns(), tokenizer=tok, template=drops)
    assert info.value.reason == "assistant_not_rendered"
    again = pickle.loads(pickle.dumps(info.value))
    assert again.reason == "assistant_not_rendered" and str(again) == str(info.value)


def test_failing_template_names_record(toks):
    tok, _ = toks
    c = ck.conv(("system", "sys"), ("user", "a"), ("assistant", "b"), cid="rec-9")
    gemma_like = ChatTemplate("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
                              "supported') }}{% endif %}{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + "
                              "m.content + '<|im_end|>\n' }}{% endfor %}")
    with pytest.raises(TemplateError, match="record rec-9.*System role not supported"):
        render_conversation(c, tokenizer=tok, template=gemma_like)
    ok = render_conversation(ck.conv(("user", "a"), ("assistant", "b")), tokenizer=tok, template=gemma_like)
    assert ok.stats["trained_turns"] == 1


def test_token_owner_is_the_overlapping_span_for_one_span_and_many():
    """A token is trained when its characters overlap a trained span (owner: that span's index, else -1),
    against a direct overlap test, for one span (its own short path) and several."""
    from tokenmill.sft.render import _token_owner

    rng = np.random.default_rng(3)
    for _ in range(300):
        cuts = np.sort(rng.choice(np.arange(1, 60), size=rng.integers(1, 8), replace=False))
        starts = np.concatenate([[0], cuts[:-1]]).astype(np.int64)
        ends = cuts.astype(np.int64)
        edges = np.sort(rng.choice(np.arange(0, 61), size=2 * rng.integers(1, 4), replace=False))
        spans = [(int(a), int(b)) for a, b in zip(edges[0::2], edges[1::2])]
        for chosen in (spans, spans[:1]):
            mask, owner = _token_owner(starts, ends, chosen)
            want = [next((k for k, (a, b) in enumerate(chosen) if s < b and e > a), -1) for s, e in zip(starts, ends)]
            assert owner.tolist() == want and mask.tolist() == [w >= 0 for w in want]
            assert owner.dtype == np.int64
