"""vocab.json + merges.txt directories are converted by transformers once, then read from the cache."""

from __future__ import annotations

import json

import pytest

from tokenmill.tokenize import load_tokenizer, sources

pytest.importorskip("transformers")


def _gpt2_like_dir(root, merges: list[str]):
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["Ġ"]
    vocab = {c: i for i, c in enumerate(chars)}
    for m in merges:
        vocab[m.replace(" ", "")] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    root.mkdir()
    (root / "vocab.json").write_text(json.dumps(vocab))
    (root / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (root / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GPT2Tokenizer", "eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>"}))
    return root


def test_converted_once_then_cached_and_reconverted_when_a_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "cache"))
    d = _gpt2_like_dir(tmp_path / "tok", ["t h", "th e"])
    calls = []
    real = sources._convert_with_transformers
    monkeypatch.setattr(sources, "_convert_with_transformers", lambda p: calls.append(p) or real(p))
    first = load_tokenizer(d, fast=False)
    second = load_tokenizer(d, fast=False)
    assert len(calls) == 1
    assert first.fingerprint == second.fingerprint
    assert first.encode("the theme") == second.encode("the theme") == [28, 26, 28, 12, 4]  # the, Ġ, the, m, e
    (d / "merges.txt").write_text("#version: 0.2\nt h\n")
    third = load_tokenizer(d, fast=False)
    assert len(calls) == 2 and third.fingerprint != first.fingerprint
    assert len(list((tmp_path / "cache" / "converted").iterdir())) == 2
