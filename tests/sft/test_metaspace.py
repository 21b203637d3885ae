"""SentencePiece / Metaspace tokenizers around control tokens: text right after `[INST]`, `[/INST]` or `</s>` gets
the ids apply_chat_template gives, on the encoder's whole-text path and on its piecewise path (taken when a
message holds a literal control string)."""

from __future__ import annotations

import json
import shutil

import chatkit as ck
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tokenmill.sft.render import render_conversation
from tokenmill.sft.template import load_template
from tokenmill.tokenize import load_tokenizer

transformers = pytest.importorskip("transformers")

# Mistral-v0.3-style, contents written right after the control tokens
TIGHT = ("{{- bos_token }}{%- for m in messages %}{%- if m['role'] == 'user' %}{{- '[INST]' + m['content'] + '[/INST]' }}"
         "{%- elif m['role'] == 'assistant' %}{{- m['content'] + eos_token }}{%- endif %}{%- endfor %}")


def _metaspace_dir(path, prepend_scheme: str):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prepend_scheme, split=False)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme=prepend_scheme, split=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>", "[INST]", "[/INST]"],
                                  show_progress=False)
    tok.train_from_iterator(ck.CORPUS * 4, trainer=trainer)
    path.mkdir()
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "add_bos_token": False, "chat_template": TIGHT}))
    return path


def _conversations(lead: str = " "):
    return [
        ck.conv(("user", "Hello there"), ("assistant", "Sure"), ("user", f"{lead}how are you?"), ("assistant", "\nFine")),
        ck.conv(("user", "say </s> or [INST] please"), ("assistant", "Sure"), ("user", "again"), ("assistant", "ok")),
    ]


def _check(tok, hf, template, lead=" "):
    plain, literal = (render_conversation(c, tokenizer=tok, template=template) for c in _conversations(lead))
    assert plain.ids.tolist() == list(hf.apply_chat_template(plain.messages, chat_template=template.source,
                                                             tokenize=True, return_dict=False))
    assert literal.stats["control_tokens_neutralised"] == sum(s in tok.special_tokens for s in ("</s>", "[INST]"))
    sane = [{**m, "content": m["content"].replace("</s>", "·").replace("[INST]", "·")} for m in literal.messages]
    want = list(hf.apply_chat_template(sane, chat_template=template.source, tokenize=True, return_dict=False))
    runs = ck.trained_runs(literal.ids, literal.mask)
    from tokenmill.sft.render import render_conversation as again
    sane_conv = ck.conv(*[(m["role"], m["content"]) for m in sane])
    sane_rendered = again(sane_conv, tokenizer=tok, template=template)
    assert sane_rendered.ids.tolist() == want
    assert runs == ck.trained_runs(sane_rendered.ids, sane_rendered.mask)  # "Sure" after [/INST]: same ids
    return plain, literal


@pytest.mark.parametrize("scheme", ["first", "always"])
def test_metaspace_text_after_control_tokens(tmp_path, scheme):
    d = _metaspace_dir(tmp_path / scheme, scheme)
    _check(load_tokenizer(d, fast=False), transformers.AutoTokenizer.from_pretrained(str(d)), load_template(d))


@pytest.mark.realdata
@pytest.mark.parametrize("files", ["json", "model"])
def test_real_mistral_v03_after_control_tokens(shared_data, tmp_path, files):
    d = tmp_path / files
    d.mkdir()
    name = "tokenizer.json" if files == "json" else "tokenizer.model"
    shutil.copy(shared_data / "tokenizers" / f"mistral-7b-instruct-v0.3_{name}", d / name)
    shutil.copy(shared_data / "chat_templates" / "mistral-7b-instruct-v0.3_tokenizer_config.json",
                d / "tokenizer_config.json")
    tok, hf = load_tokenizer(d), transformers.AutoTokenizer.from_pretrained(str(d))
    for template in (load_template(d), load_template(TIGHT)):
        # A SentencePiece .model is encoded by sentencepiece itself, which splits runs of spaces unlike the BPE
        # that transformers 5 converts it to (see README): no content here makes a double space.
        _check(tok, hf, template, lead=" " if files == "json" else "")


@pytest.mark.realdata
def test_real_llama2_after_control_tokens(shared_data, tmp_path):
    d = tmp_path / "llama2"
    d.mkdir()
    shutil.copy(shared_data / "tokenizers" / "llama2_tokenizer.model", d / "tokenizer.model")
    shutil.copy(shared_data / "tokenizers" / "llama2_tokenizer_config.json", d / "tokenizer_config.json")
    tok, hf = load_tokenizer(d), transformers.AutoTokenizer.from_pretrained(str(d))
    for template in (load_template(ck.LLAMA2), load_template(TIGHT)):
        _check(tok, hf, template, lead="")
