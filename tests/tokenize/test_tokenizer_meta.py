"""A tokenizer.json tokenizer's metadata cached by its files: a load whose parity verdict is cached parses
nothing, and gives the same tokenizer as a load that parses the files."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from test_tokenizer import train_dir

import tokenmill.tokenize.tokenizer as tokenizer_module
from tokenmill.tokenize import load_tokenizer
from tokenmill.tokenize.isolated import load_tokenizer_isolated
from tokenmill.tokenize.tokenizer import load_if_checked

RENDER = "<|im_start|>user\nHi ünï 🎉<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _no_parse(monkeypatch):
    def refuse(source):
        raise AssertionError(f"{source.name}: tokenizer.json parsed")

    monkeypatch.setattr(tokenizer_module, "reference_for", refuse)


def _same(a, b):
    skip = {"_ref", "_fast", "_special_re", "_piece_table", "_special_id_table"}
    assert {k: v for k, v in vars(a).items() if k not in skip} == {k: v for k, v in vars(b).items() if k not in skip}
    assert a._special_re.pattern == b._special_re.pattern
    assert a.info() == b.info()


def test_a_checked_load_parses_nothing_and_gives_the_same_tokenizer(tmp_path, cache, monkeypatch):
    d = train_dir(tmp_path / "tok", template="{{ messages }}")
    parsed = load_tokenizer(d)  # checks the fast path, caches its verdict and the metadata
    assert list((cache / "tokenizer-meta").iterdir())
    _no_parse(monkeypatch)
    for known in (load_tokenizer(d), load_if_checked(d), load_tokenizer_isolated(d)):
        _same(known, parsed)
        assert known._ref is None and known.backend == "gigatoken"
        assert known.encode("Hi ünï 🎉 <|im_end|>") == parsed.encode("Hi ünï 🎉 <|im_end|>")
        for got, want in zip(known.encode_rendered_batch([RENDER], [[]])[0],
                             parsed.encode_rendered_batch([RENDER], [[]])[0]):
            assert np.array_equal(got, want)
        _same(pickle.loads(pickle.dumps(known)), parsed)


def test_the_config_is_part_of_the_key(tmp_path, cache):
    d = train_dir(tmp_path / "tok")
    assert load_tokenizer(d).eos_token == "<|im_end|>"
    config = json.loads((d / "tokenizer_config.json").read_text())
    (d / "tokenizer_config.json").write_text(json.dumps({**config, "eos_token": "<|endoftext|>"}))
    again = load_tokenizer(d)
    assert again.eos_token == "<|endoftext|>" and again.eos_id == again.special_tokens["<|endoftext|>"]
    assert len(list((cache / "tokenizer-meta").iterdir())) == 2


def test_no_cached_verdict_or_a_damaged_entry_parses_the_files(tmp_path, cache, monkeypatch):
    d = train_dir(tmp_path / "tok")
    parsed = load_tokenizer(d)
    for entry in (cache / "tokenizer-meta").iterdir():
        entry.write_text('{"special_tokens": ')
    calls = []
    real = tokenizer_module.reference_for
    monkeypatch.setattr(tokenizer_module, "reference_for", lambda source: calls.append(source) or real(source))
    _same(load_tokenizer(d), parsed)
    assert len(calls) == 1
    _same(load_tokenizer(d), parsed)  # the entry was written again
    assert len(calls) == 1
    for verdict in (cache / "parity").rglob("*"):
        if verdict.is_file():
            verdict.unlink()
    assert load_if_checked(d) is None  # nothing vouches for the fast path: the full load checks it again
    _same(load_tokenizer(d), parsed)
    assert len(calls) == 3
