"""Special tokens declared only in tokenizer_config.json (named tokens, additional/extra special tokens,
added_tokens_decoder) are added on load with the ids transformers gives them, so a template's `<bos>` is one
control token, as with apply_chat_template."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sft"))
import chatkit as ck

from tokenmill.sft.render import render_conversation
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer

transformers = pytest.importorskip("transformers")

CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
    "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"],
    "added_tokens_decoder": {"450": {"content": "<x>", "special": True, "lstrip": False, "rstrip": False,
                                     "normalized": False, "single_word": False},
                             "451": {"content": "<y>", "special": False, "lstrip": False, "rstrip": False,
                                     "normalized": False, "single_word": False}},
    "chat_template": ck.GEMMA, "add_bos_token": False,
}


@pytest.fixture(scope="module")
def declared_dir(tmp_path_factory):
    d = ck.build_tokenizer_dir(tmp_path_factory.mktemp("declared"), specials=["<|endoftext|>"])
    (d / "tokenizer_config.json").write_text(json.dumps(CONFIG))
    return d


def test_declared_tokens_get_transformers_ids(declared_dir):
    tok = load_tokenizer(declared_dir)
    hf = transformers.AutoTokenizer.from_pretrained(str(declared_dir))
    for token in ("<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>", "<x>"):
        assert tok.special_tokens[token] == hf.convert_tokens_to_ids(token), token
    assert "<y>" not in tok.special_tokens and tok.token_to_id("<y>") == hf.convert_tokens_to_ids("<y>")
    assert tok.bos_id == hf.bos_token_id and tok.eos_id == hf.eos_token_id and tok.pad_id == hf.pad_token_id
    assert tok.vocab_size == len(hf)


def test_a_template_bos_is_one_control_token_as_with_apply_chat_template(declared_dir):
    tok = load_tokenizer(declared_dir)
    hf = transformers.AutoTokenizer.from_pretrained(str(declared_dir))
    template = load_template(declared_dir)
    c = ck.conv(("user", "Hello there"), ("assistant", "Hi!"), ("user", "Bye"), ("assistant", "Bye!"))
    r = render_conversation(c, tokenizer=tok, template=template)
    want = list(hf.apply_chat_template(r.messages, chat_template=template.source, tokenize=True, return_dict=False))
    assert r.ids.tolist() == want and r.ids[0] == tok.special_tokens["<bos>"]
    runs = [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)]
    assert runs == ["Hi!<end_of_turn>", "Bye!<end_of_turn>"]


def test_nothing_missing_keeps_the_file_and_its_fingerprint(tmp_path):
    d = ck.build_tokenizer_dir(tmp_path / "plain")
    before = load_tokenizer(d).fingerprint
    config = json.loads((d / "tokenizer_config.json").read_text())
    (d / "tokenizer_config.json").write_text(json.dumps({**config, "additional_special_tokens": ["<|im_start|>"]}))
    assert load_tokenizer(d).fingerprint == before



def test_nothing_missing_is_remembered_and_a_missing_token_is_added_every_time(tmp_path, monkeypatch):
    """A file that holds every declared token is parsed once (then its bytes and the declared tokens say so);
    one that lacks a token gets it on every load, and a newly declared token is looked for again."""
    from tokenmill.tokenize import sources

    d = ck.build_tokenizer_dir(tmp_path / "plain")
    config = json.loads((d / "tokenizer_config.json").read_text())
    (d / "tokenizer_config.json").write_text(json.dumps({**config, "additional_special_tokens": ["<|im_start|>"]}))
    first = sources.resolve(d).data
    calls = []
    real = sources._add_declared
    monkeypatch.setattr(sources, "_add_declared", lambda *a: calls.append(a) or real(*a))
    assert sources.resolve(d).data == first and calls == []
    (d / "tokenizer_config.json").write_text(json.dumps({**config, "additional_special_tokens": ["<new>"]}))
    added = sources.resolve(d).data
    assert len(calls) == 1 and added != first
    assert sources.resolve(d).data == added and len(calls) == 2
    assert load_tokenizer(d).special_tokens["<new>"] == json.loads(added)["added_tokens"][-1]["id"]


@pytest.mark.realdata
def test_real_gemma_config_over_a_tokenizer_without_its_tokens(shared_data, tmp_path):
    """Qwen2's BPE under Gemma's tokenizer_config.json: <bos>, <start_of_turn>, <end_of_turn> exist only there."""
    base = tmp_path / "qwen2"
    base.mkdir()
    shutil.copy(shared_data / "tokenizers" / "qwen2_vocab.json", base / "vocab.json")
    shutil.copy(shared_data / "tokenizers" / "qwen2_merges.txt", base / "merges.txt")
    (base / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))
    d = tmp_path / "gemma_on_qwen2"
    d.mkdir()
    (d / "tokenizer.json").write_text(transformers.AutoTokenizer.from_pretrained(str(base)).backend_tokenizer.to_str())
    config = json.loads((shared_data / "chat_templates" / "ortx_gemma_tokenizer_config.json").read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    tok, hf = load_tokenizer(d), transformers.AutoTokenizer.from_pretrained(str(d))
    template = load_template(d)
    c = ck.conv(("user", "What is the capital of France?"), ("assistant", "Paris."), ("user", "And Spain?"),
                ("assistant", "Madrid."))
    r = render_conversation(c, tokenizer=tok, template=template)
    assert r.ids.tolist() == list(hf.apply_chat_template(r.messages, chat_template=template.source, tokenize=True,
                                                         return_dict=False))
    assert [hf.decode(run) for run in ck.trained_runs(r.ids, r.mask)] == ["Paris.<end_of_turn>",
                                                                          "Madrid.<end_of_turn>"]
