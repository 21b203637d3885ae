"""The batched language identifier gives py3langid's own labels (its per-byte loop is the oracle)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from curatekit import ENGLISH, OTHER

EDGE = ["", "   ", "12345 678", "ALL CAPS ENGLISH TEXT ABOUT THE WEATHER", "日本語の文章です。今日は晴れです。",
        "Это предложение на русском языке.", "مرحبا بكم في هذا الموقع", "a", "\U0001F600 emoji only \u200b",
        "mixed English und Deutsch in einem Satz, with words from both", "x" * 3000]


def _oracle():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _agree(texts):
    from tokenmill.curate.langid_batch import BatchIdentifier

    ident = _oracle()
    want = [ident.classify(t) for t in texts]
    labels, probs = BatchIdentifier(ident, chunk_bytes=2000).classify(texts)  # small chunks: several passes
    assert labels == [w[0] for w in want]
    assert np.allclose(probs, [w[1] for w in want], atol=1e-4)


def test_batch_labels_equal_py3langid():
    _agree(ENGLISH + OTHER + EDGE)


def test_batch_labels_equal_py3langid_on_a_restricted_model():
    from tokenmill.curate.langid_batch import BatchIdentifier

    ident = _oracle()
    ident.set_languages(["en", "de", "fr", "no", "nn", "da"])
    texts = ENGLISH + OTHER + ["Været var fint i dag, og vi gikk en lang tur langs elva."]
    labels, _ = BatchIdentifier(ident).classify(texts)
    assert labels == [ident.classify(t)[0] for t in texts]


def test_batch_labels_equal_py3langid_on_real_web_documents(shared_data):
    path = shared_data / "pretrain" / "dolma_cc_en_head-0174.jsonl"
    texts = [json.loads(line)["text"][:4000] for line in path.open()][:60]
    if not texts:
        pytest.skip(f"{path} holds no documents")
    _agree(texts)
