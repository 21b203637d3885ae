"""A tokenizer.json's fingerprint is cached by the file's bytes: the cached value is the computed one, an
edited file gets its own, and a damaged cache entry is computed again."""

from __future__ import annotations

import json

import pytest
from test_tokenizer import train_dir

from tokenmill.tokenize import load_tokenizer
from tokenmill.tokenize import tokenizer as tokenizer_mod


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture()
def tok_dir(tmp_path):
    return train_dir(tmp_path / "tok")


def _computed(tok_dir) -> str:
    tok = load_tokenizer(tok_dir)
    return tokenizer_mod._digest({"kind": "hf", **tok.reference.canonical()})


def test_the_cached_fingerprint_is_the_computed_one(cache, tok_dir, monkeypatch):
    first = load_tokenizer(tok_dir).fingerprint
    assert list((cache / "fingerprints").iterdir())
    monkeypatch.setattr(tokenizer_mod, "_digest", lambda canonical: pytest.fail("computed although cached"))
    assert load_tokenizer(tok_dir).fingerprint == first
    monkeypatch.undo()
    assert first == _computed(tok_dir)


def test_an_edited_tokenizer_gets_its_own_fingerprint(cache, tok_dir):
    before = load_tokenizer(tok_dir).fingerprint
    path = tok_dir / "tokenizer.json"
    data = json.loads(path.read_text())
    data["normalizer"] = {"type": "Lowercase"}  # other ids for capitals: another tokenizer
    path.write_text(json.dumps(data))
    after = load_tokenizer(tok_dir).fingerprint
    assert after != before and after == _computed(tok_dir)


def test_a_damaged_cache_entry_is_computed_again(cache, tok_dir):
    first = load_tokenizer(tok_dir).fingerprint
    for entry in (cache / "fingerprints").iterdir():
        entry.write_text("not a digest")
    assert load_tokenizer(tok_dir).fingerprint == first
