"""run_pretrain with the documented tokenizer specs: a ``tokenizers.Tokenizer`` object, a directory with a
chat template (pretraining shards never carry a chat-template hash)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tokenmill.errors import TokenizerError
from tokenmill.pretrain import run_pretrain
from tokenmill.shards import open_shards
from tokenmill.tokenize import load_tokenizer

TEXTS = ["The river flows past old stone houses.", "Children count boats and birds under a pale sky.",
         "naïve café 東京 🚀 tabs\tand  double  spaces"]


def _tiny_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXTS * 4, trainer=trainer)
    return tok


@pytest.fixture()
def corpus(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    return src


def test_a_tokenizers_object_is_a_tokenizer_spec(tmp_path, corpus):
    obj = _tiny_tokenizer()
    manifest = run_pretrain([str(corpus)], out=tmp_path / "out", tokenizer=obj, workers=1, progress=False)
    assert manifest["counts"]["kept"] == len(TEXTS)
    eos = obj.token_to_id("<|endoftext|>")
    ds = open_shards(tmp_path / "out", tokenizer=load_tokenizer(obj))
    for i, text in enumerate(TEXTS):
        assert ds[i]["input_ids"].tolist() == obj.encode(text, add_special_tokens=False).ids + [eos]


def test_pretraining_shards_carry_no_chat_template_hash(tmp_path, corpus):
    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    _tiny_tokenizer().save(str(tok_dir / "tokenizer.json"))
    config = {"eos_token": "<|endoftext|>", "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}
    (tok_dir / "tokenizer_config.json").write_text(json.dumps(config))
    assert load_tokenizer(tok_dir).info()["chat_template_hash"]  # the directory does have a template
    manifest = run_pretrain([str(corpus)], out=tmp_path / "out", tokenizer=str(tok_dir), workers=1, progress=False)
    ds = open_shards(tmp_path / "out")
    assert ds.chat_template_hash == "" and all(s.header["tokenizer_info"]["chat_template_hash"] == ""
                                               for s in ds.shards)
    assert manifest["tokenizer"]["chat_template_hash"] == ""
    assert np.array_equal(ds[0]["input_ids"][-1:], [load_tokenizer(tok_dir).eos_id])


def test_no_tokenizer_is_refused_naming_the_command(tmp_path, corpus):
    with pytest.raises(TokenizerError, match=r"`tokenmill pretrain` writes tokens and was given no tokenizer"):
        run_pretrain([str(corpus)], out=tmp_path / "out", tokenizer=None, workers=1, progress=False)
    assert not (tmp_path / "out" / "manifest.json").exists()
