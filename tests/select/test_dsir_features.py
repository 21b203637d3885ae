"""The vectorised word split (a code-point class table built from the ``regex`` engine's own answers) gives
exactly the tokens of NLTK's ``WordPunctTokenizer`` pattern (:func:`words_of`, what data-selection uses),
document by document, on every script; CJK, emoji and the rest of the astral planes take ``regex`` itself."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from tokenmill.curate.dsir_features import by_document, ngrams, tokenize, weights_of, words_of

TRICKY = ["Café déjà vu: 120⁰C at 3.88$ — naïve Ⓐ x²+y₂ ½", "ΟΔΟΣ ΑΣ Β σΣ", "İstanbul ǅ ß ﬁ K", "Ꭰ Ᏼ ꭰ",
          "\ufeffbom\u00a0nbsp\u2009thin x\u0085y a\x1cb\x1fc", "ZWJ\u200djoin ZWNJ\u200cx", "emoji 🙂🙂ok 𝐀𝐁",
          "中文 文本。日本語", "", "   ", "a_b __init__ -- ... !!", "Hindi हिन्दी ज़ ि", "tab\tsep\nnew\rline", None]


def _split(texts: list) -> list[list[str]]:
    tokens, doc, lengths = tokenize(texts)
    out: list[list[str]] = [[] for _ in texts]
    for token, d in zip(tokens.to_pylist(), doc):
        out[d].append(token)
    assert [len(t) for t in out] == lengths.tolist()
    return out


def test_the_split_is_nltks_word_punct_split_on_every_kind_of_text():
    assert _split(TRICKY) == [words_of(t or "") for t in TRICKY]


def test_a_documents_weight_does_not_depend_on_its_batch():
    ratio = np.random.default_rng(0).normal(size=10_000)
    alone = [weights_of(*by_document(ngrams([t])), ratio)[0] for t in TRICKY]
    together = weights_of(*by_document(ngrams(TRICKY)), ratio)
    assert together.tolist() == alone


@pytest.mark.realdata
def test_the_split_on_388_languages_of_the_udhr(shared_data):
    with zipfile.ZipFile(shared_data / "curation" / "langid" / "nltk_udhr2.zip") as z:
        texts = [z.read(n).decode("utf-8", "replace") for n in z.namelist() if n.endswith(".txt")]
    assert len(texts) > 300
    assert _split(texts) == [words_of(t) for t in texts]
