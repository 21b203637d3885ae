"""A tokenizer.json's fast encoder is written to the cache once, then loaded from it; a bad cached file is rebuilt."""

from __future__ import annotations

import json

import pytest

from tokenmill.tokenize import backends
from tokenmill.tokenize.sources import resolve
from tokenmill.tokenize.tokenizer import load_tokenizer

tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("gigatoken")

TEXTS = ["Hello world, the lazy dog!", "a <|im_end|> b <|endoftext|>", "东京 🎉 12345", "", "  spaced\n\n  out  ",
         "def add(a, b):\n    return a + b\n"]


def train_dir(path, *, vocab_size=400):
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXTS * 20, trainer)
    path.mkdir(parents=True)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    return path


@pytest.fixture()
def tok_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(backends, "PREBUILT", {})
    return train_dir(tmp_path / "tok")


def _ids(tok):
    ids, offsets = tok.encode_batch(TEXTS)
    return ids.tolist(), offsets.tolist()


def _cached(tmp_path):
    return sorted((tmp_path / "cache" / "encoders").glob("*.json"))


def test_built_once_then_loaded_from_the_cache_with_the_same_ids(tok_dir, tmp_path, monkeypatch):
    first = load_tokenizer(tok_dir)
    want = _ids(first)
    [path] = _cached(tmp_path)
    assert path.name.startswith(f"{backends.FAST_JSON_VERSION}-{backends.source_key(resolve(tok_dir))}")
    builds = []
    real = backends._fast_json
    monkeypatch.setattr(backends, "_fast_json", lambda j: builds.append(1) or real(j))
    second = load_tokenizer(tok_dir)
    assert _ids(second) == want and builds == []
    assert second.backend == "gigatoken"


@pytest.mark.parametrize("junk", [b"", b"{not json", b'{"model": 3}'])
def test_an_unreadable_cached_encoder_is_rebuilt_and_replaced(tok_dir, tmp_path, junk):
    want = _ids(load_tokenizer(tok_dir))
    [path] = _cached(tmp_path)
    good = path.read_bytes()
    path.write_bytes(junk)
    assert _ids(load_tokenizer(tok_dir)) == want
    assert path.read_bytes() == good


def test_a_changed_tokenizer_file_gets_its_own_cached_encoder(tok_dir, tmp_path):
    load_tokenizer(tok_dir)
    other = train_dir(tmp_path / "other", vocab_size=300)
    assert _ids(load_tokenizer(other)) != _ids(load_tokenizer(tok_dir))
    assert len(_cached(tmp_path)) == 2


def test_a_read_only_cache_costs_only_the_build(tok_dir, tmp_path):
    (tmp_path / "cache").write_text("not a directory")  # the cache cannot be written
    assert load_tokenizer(tok_dir).backend == "gigatoken"


def test_a_sources_key_is_computed_once_and_a_changed_copy_computes_its_own(tmp_path):
    import dataclasses
    import pickle

    from tokenmill.tokenize.sources import resolve

    source = resolve("default")
    assert source.key is None
    key = backends.source_key(source)
    assert source.key == key and backends.source_key(source) is key  # kept on the object
    assert pickle.loads(pickle.dumps(source)).key == key  # travels with it to a worker
    changed = dataclasses.replace(source, data=source.data + b"\n")
    assert changed.key is None and backends.source_key(changed) != key
    assert dataclasses.replace(source).key is None and dataclasses.replace(source) == source  # nor in equality
