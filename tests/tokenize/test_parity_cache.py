"""The fast path's parity verdict is cached per tokenizer fingerprint and checked texts."""

from __future__ import annotations

import pytest
from test_tokenizer import train_dir

from tokenmill.tokenize import load_tokenizer
from tokenmill.tokenize import parity as parity_mod
from tokenmill.tokenize.parity import SAMPLE, verdict_key, write_verdict

TEXTS = ["A document of the run's own inputs.", "Another one, with numbers 1234 and ünïcödé."]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return train_dir(tmp_path_factory.mktemp("tok") / "tok")


def _count_checks(monkeypatch) -> list:
    calls = []
    real = parity_mod.first_mismatch

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(parity_mod, "first_mismatch", counted)
    return calls


def test_a_cached_verdict_skips_the_check_and_the_fast_build(cache, tok_dir, monkeypatch):
    calls = _count_checks(monkeypatch)
    first = load_tokenizer(tok_dir, parity_sample=TEXTS)
    assert calls == [1] and first.backend == "gigatoken" and list((cache / "parity").glob("*.json"))
    second = load_tokenizer(tok_dir, parity_sample=TEXTS)
    assert calls == [1] and second.backend == "gigatoken" and second._fast is None  # built where it encodes
    assert second.fingerprint == first.fingerprint
    assert second._ref is None  # metadata came from the cache (tests/tokenize/test_tokenizer_meta.py): nothing parsed
    for text in TEXTS:
        assert second.encode(text) == first.encode(text) == list(first.reference.encode(text))
    load_tokenizer(tok_dir, parity_sample=[*TEXTS, "a new text"])  # other texts: checked again
    assert calls == [1, 1]


def test_a_cached_disagreement_still_falls_back_loudly(cache, tok_dir, monkeypatch):
    fingerprint = load_tokenizer(tok_dir, fast=False).fingerprint
    write_verdict(verdict_key(fingerprint, SAMPLE + TEXTS), "fast path disagrees with tokenizers (text 'x')")
    calls = _count_checks(monkeypatch)
    with pytest.warns(UserWarning, match="disagrees with tokenizers"):
        tok = load_tokenizer(tok_dir, parity_sample=TEXTS)
    assert tok.backend == "tokenizers" and calls == []


def test_an_unwritable_cache_only_costs_the_check(tmp_path, tok_dir, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TOKENMILL_CACHE", str(blocker))
    calls = _count_checks(monkeypatch)
    assert load_tokenizer(tok_dir, parity_sample=TEXTS).backend == "gigatoken"
    assert load_tokenizer(tok_dir, parity_sample=TEXTS).backend == "gigatoken" and calls == [1, 1]


def test_metadata_read_from_tokenizer_json_matches_tokenizers(tok_dir):
    import tokenizers

    from tokenmill.tokenize.backends import reference_for
    from tokenmill.tokenize.sources import resolve

    ref = reference_for(resolve(tok_dir))
    built = tokenizers.Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    added = list(built.get_added_tokens_decoder())
    assert ref.vocab_size == max([*added, built.get_vocab_size(with_added_tokens=False) - 1]) + 1
    for token in [*built.get_vocab(with_added_tokens=True), "no-such-token", "<|im_end|>"]:
        assert ref.token_to_id(token) == built.token_to_id(token), token
    assert ref._ordinary_tok is None


def test_encode_batch_reads_arrow_string_arrays(tok_dir):
    import numpy as np
    import pyarrow as pa

    texts = ["", "plain words", "naïve café 東京 🚀", "  spaces\tand\nlines  ", *TEXTS]
    for backend in (load_tokenizer(tok_dir), load_tokenizer(tok_dir, fast=False)):
        want = backend.encode_batch(texts)
        for array in (pa.array(texts, pa.large_string()), pa.array(["pad", *texts], pa.string()).slice(1)):
            got = backend.encode_batch(array)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), backend.backend


def test_a_cached_verdict_loads_in_place_without_a_child_process(cache, tok_dir, monkeypatch):
    from tokenmill.tokenize import isolated

    started = []
    real = isolated.ProcessPoolExecutor

    def counting(*args, **kwargs):
        started.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(isolated, "ProcessPoolExecutor", counting)
    # the verdict is written here (a fork server started earlier in this process keeps the environment it
    # started with, so a child's verdict could land in another cache directory than this test's)
    first = load_tokenizer(tok_dir, parity_sample=TEXTS)
    second = isolated.load_tokenizer_isolated(tok_dir, parity_sample=TEXTS)  # cached: nothing to build
    assert started == [] and second.backend == "gigatoken" and second._ref is None and second._fast is None
    assert second.info() == first.info()
    isolated.load_tokenizer_isolated(tok_dir, parity_sample=[*TEXTS, "unchecked"])  # other texts: checked in a child
    assert started == [1]
