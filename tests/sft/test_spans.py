"""Spans from the renderer: contents that look like template text (one character, a role name, a control string,
random short strings) on six template families, checked against transformers' apply_chat_template.

For a conversation without control strings in its texts, our ids must equal apply_chat_template's ids. For one
with them (the deliberate difference), the typed string is text: decoding our ids gives transformers' render,
and our control ids are, in order, the control ids apply_chat_template gives once the typed strings are
replaced by plain words. In both cases the trained tokens decode to exactly each assistant output and its stop.
"""

from __future__ import annotations

import random

import chatkit as ck
import numpy as np
import pytest

from tokenmill.errors import TemplateError
from tokenmill.sft.parity import check_parity
from tokenmill.sft.render import render_conversation
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer

transformers = pytest.importorskip("transformers")

# family -> (template, bos, eos, its control strings, the text after an assistant output through its stop,
#            how the template renders an assistant content)
FAMILIES = {
    "chatml": (None, "<s>", "<|im_end|>", ["<|im_start|>", "<|im_end|>", "<|endoftext|>"], "<|im_end|>",
               lambda c: c),
    "llama3": (ck.LLAMA3, "<|begin_of_text|>", "<|eot_id|>",
               ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"], "<|eot_id|>",
               str.strip),
    "mistral": (ck.MISTRAL, "<s>", "</s>", ["<s>", "</s>", "[INST]", "[/INST]"], "</s>", str.strip),
    "gemma": (ck.GEMMA, "<bos>", "<eos>", ["<bos>", "<start_of_turn>", "<end_of_turn>"], "<end_of_turn>",
              str.strip),
    "deepseek_r1": (ck.R1, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                    ["<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"],
                    "<｜end▁of▁sentence｜>", lambda c: c.split("</think>")[-1]),
    "llama2": (ck.LLAMA2, "<s>", "</s>", ["<s>", "</s>", "[INST]", "[/INST]"], " </s>", str.strip),
}
ROLE_NAMES = ["user", "assistant", "system", "model", "tool"]


@pytest.fixture(scope="module")
def family_toks(tmp_path_factory):
    out = {}
    for name, (template, bos, eos, *_rest) in FAMILIES.items():
        d = ck.build_tokenizer_dir(tmp_path_factory.mktemp(name), bos=bos, eos=eos, specials=ck.FAMILY_SPECIALS)
        out[name] = (load_tokenizer(d), ck.hf_tokenizer(d), load_template(template))
    return out


def _conversation(user: str, answer: str, *, system: str | None = None, cid: str = "c") -> dict:
    turns = [("system", system)] if system is not None else []
    turns += [("user", user), ("assistant", answer), ("user", f"again: {user}"), ("assistant", answer)]
    return ck.conv(*turns, cid=cid)


def _sanitised(rendered, controls: list[str]) -> list[dict]:
    def clean(text):
        for k, c in enumerate(sorted(controls, key=len, reverse=True)):
            text = text.replace(c, f" word{k} ")
        return text
    return [{**m, "content": clean(m["content"])} if isinstance(m.get("content"), str) else m
            for m in rendered.messages]


def check_against_oracle(family: str, toks, conv: dict) -> None:
    """The checks of this module's docstring for one conversation."""
    tok, hf, template = toks
    *_, stop, renders = FAMILIES[family]
    r = render_conversation(conv, tokenizer=tok, template=template)
    texts = [m["content"] for m in conv["messages"]]
    typed = sum(t.count(c) for t in texts for c in tok.special_tokens if c in t)
    want = list(hf.apply_chat_template(r.messages, chat_template=template.source, tokenize=True, return_dict=False))
    specials = set(tok.special_tokens.values())
    if typed == 0:
        assert r.ids.tolist() == want, (family, texts)
        assert r.stats["control_tokens_neutralised"] == 0
        assert check_parity(conv, r, hf, template) is None
    else:
        rendered_text = hf.apply_chat_template(r.messages, chat_template=template.source, tokenize=False)
        assert hf.decode(r.ids.tolist()) == rendered_text == r.text
        sane = hf.apply_chat_template(_sanitised(r, list(tok.special_tokens)), chat_template=template.source,
                                      tokenize=True, return_dict=False)
        assert [i for i in r.ids.tolist() if i in specials] == [i for i in sane if i in specials], (family, texts)
        assert r.stats["control_tokens_neutralised"] > 0
        assert "exempt" in check_parity(conv, r, hf, template)
    outputs = [renders(m["content"]) for m in conv["messages"] if m["role"] == "assistant"]
    runs = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
    assert len(runs) == len(outputs), (family, texts, runs)
    for run, output in zip(runs, outputs):
        assert run.endswith(output + stop) and not run[: len(run) - len(output + stop)].strip(), (family, run, output)
    assert r.stats["stop_token_trained"]


ONE_CHARS = ["a", "s", "t", "|", "<", ">", "_", "/", "[", "]", "｜", "▁", "I", "\n", "!"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_one_character_contents(family_toks, family):
    for ch in ONE_CHARS:
        system = None if family == "mistral" else ch
        check_against_oracle(family, family_toks[family], _conversation(ch, ch, system=system))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_contents_equal_to_a_role_name(family_toks, family):
    for role in ROLE_NAMES:
        check_against_oracle(family, family_toks[family], _conversation(role, role, system=role))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_contents_equal_to_each_control_string(family_toks, family):
    tok = family_toks[family][0]
    for control in FAMILIES[family][3]:
        assert control in tok.special_tokens
        check_against_oracle(family, family_toks[family], _conversation(control, control, system=control))
        check_against_oracle(family, family_toks[family], _conversation(f"say {control}", f"{control} is text"))


def test_the_template_control_tokens_stay_real_and_the_typed_ones_become_text(family_toks):
    tok, hf, template = family_toks["chatml"]
    c = _conversation("<|im_start|>", "<|im_end|>")
    r = render_conversation(c, tokenizer=tok, template=template)
    start, end = tok.special_tokens["<|im_start|>"], tok.special_tokens["<|im_end|>"]
    assert int((r.ids == start).sum()) == 4 and int((r.ids == end).sum()) == 4  # the template's own, no more
    assert r.stats["control_tokens_neutralised"] == 4 and r.stats["control_tokens_real"] == 8
    runs = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
    assert runs == ["<|im_end|><|im_end|>"] * 2
    trained_ids = r.ids[r.mask].tolist()
    assert trained_ids.count(end) == 2 and start not in trained_ids  # only the two real stops are control ids


ALPHABET = ["a", "s", "t", "|", "<", ">", "_", " ", "\n", "im", "start", "end", "user", "assistant", "model",
            "INST", "[", "]", "eot", "｜", "▁", "/", "!", "<think>", "</think>"]


def _random_text(rng: random.Random, controls: list[str]) -> str:
    pieces = rng.choices(ALPHABET + controls, weights=[4] * len(ALPHABET) + [1] * len(controls), k=rng.randint(1, 4))
    return "".join(pieces)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_random_short_strings(family_toks, family):
    rng = random.Random(1234)
    controls = FAMILIES[family][3]
    checked = 0
    for n in range(60):
        user, answer = _random_text(rng, controls), _random_text(rng, controls)
        system = None if family == "mistral" or rng.random() < 0.5 else _random_text(rng, controls)
        c = _conversation(user, answer, system=system, cid=f"rand-{n}")
        output = FAMILIES[family][5](answer)
        try:
            check_against_oracle(family, family_toks[family], c)
            checked += 1
        except TemplateError as exc:  # only an assistant turn whose output the template does not render
            assert exc.reason == "assistant_not_rendered" and not output.strip(), (family, user, answer, exc)
    assert checked >= 50


def test_texts_holding_a_reserved_character_are_refused(family_toks):
    tok, _, template = family_toks["chatml"]
    with pytest.raises(TemplateError) as info:
        render_conversation(_conversation("hi \U000f0000\U00100001", "ok"), tokenizer=tok, template=template)
    assert info.value.reason == "sentinel_collision"


def test_templates_that_mark_texts_differently_are_rendered_twice_and_compared(family_toks):
    tok, hf, _ = family_toks["chatml"]
    # `content[0]` and `length` see the sentinels: calibration finds the template unfaithful, and every
    # conversation is compared with a plain render; one that renders differently is left out.
    template = load_template(
        "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' }}{% if m.content|length > 3 %}{{ m.content }}"
        "{% else %}{{ m.content }}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}")
    r = render_conversation(_conversation("hello", "world"), tokenizer=tok, template=template)
    assert r.ids.tolist() == list(hf.apply_chat_template(r.messages, chat_template=template.source, tokenize=True,
                                                         return_dict=False))
    odd = load_template(
        "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' }}{% if m.content|length < 4 %}{{ m.content }}"
        "{% else %}short{% endif %}{{ '<|im_end|>\n' }}{% endfor %}")
    with pytest.raises(TemplateError) as info:
        render_conversation(_conversation("hi", "yo"), tokenizer=tok, template=odd)
    assert info.value.reason in ("spans_unresolved", "assistant_not_rendered")
    assert np.all(r.mask[r.ids == tok.special_tokens["<|im_start|>"]] == 0)


REAL = ["ortx_qwen2.5", "qwen2-1.5b-instruct-finetune", "meta-llama-3-8b-instruct", "deepseek-r1-distill-qwen-32b",
        "ortx_gemma", "mistral-7b-instruct-v0.3"]


def _real_dir(shared, name: str, out):
    import json
    import shutil

    out.mkdir()
    config = json.loads((shared / "chat_templates" / f"{name}_tokenizer_config.json").read_text(encoding="utf-8"))
    if name.startswith("mistral"):
        shutil.copy(shared / "tokenizers" / "mistral-7b-instruct-v0.3_tokenizer.json", out / "tokenizer.json")
    else:
        shutil.copy(shared / "tokenizers" / "qwen2_vocab.json", out / "vocab.json")
        shutil.copy(shared / "tokenizers" / "qwen2_merges.txt", out / "merges.txt")
        config["tokenizer_class"] = "Qwen2Tokenizer"
    (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return out


@pytest.mark.realdata
@pytest.mark.parametrize("name", REAL)
def test_real_templates_with_tricky_contents(shared_data, tmp_path, name):
    """The real templates and tokenizers of shared_data, transformers loading the same directory as oracle."""
    from tokenmill.sft.render import shape_of

    d = _real_dir(shared_data, name, tmp_path / name)
    tok, hf, template = load_tokenizer(d), transformers.AutoTokenizer.from_pretrained(str(d)), load_template(d)
    stop = shape_of(template, tok).stop_marker
    controls = sorted(s for s in tok.special_tokens if template.source.count(s) or s in (tok.bos_token, tok.eos_token))
    contents = ["a", "s", "|", "<", "start", "user", "assistant", "system", "model", *controls]
    specials = set(tok.special_tokens.values())
    for text in contents:
        system = None if name in ("ortx_gemma", "mistral-7b-instruct-v0.3") else text
        c = _conversation(text, text, system=system, cid=f"{name}:{text}")
        r = render_conversation(c, tokenizer=tok, template=template)
        typed = any(s in text for s in tok.special_tokens)
        if not typed:
            assert r.ids.tolist() == list(hf.apply_chat_template(r.messages, chat_template=template.source,
                                                                 tokenize=True, return_dict=False)), (name, text)
        else:
            sane = hf.apply_chat_template(_sanitised(r, list(tok.special_tokens)), chat_template=template.source,
                                          tokenize=True, return_dict=False)
            assert [i for i in r.ids.tolist() if i in specials] == [i for i in sane if i in specials], (name, text)
            assert "exempt" in check_parity(c, r, hf, template)
        runs = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
        # the first trained token may carry template characters merged with the content (R1's headers are
        # plain text in this Qwen2 vocabulary); ids equal the oracle's above
        assert len(runs) == 2 and all(run.endswith(stop) and run[: -len(stop)].strip().endswith(text)
                                      and len(run) - len(stop) - len(text) <= 2 for run in runs), (name, text, runs)
