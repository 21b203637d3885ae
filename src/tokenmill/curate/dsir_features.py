"""DSIR's hashed n-gram features (Xie et al. 2023), the same buckets as the ``data-selection`` package by
construction, computed a batch at a time.

A document's features: its text lowercased and split by the regular expression ``\\w+|[^\\w\\s]+`` (NLTK's
``WordPunctTokenizer``, the package's default tokenizer), then every word and every pair of adjacent words
joined by one space, each hashed to ``int(sha256(utf8).hexdigest(), 16) % buckets`` (the package's
``hash_buckets``; 10,000 buckets by default). A bag-of-n-grams model is the bucket counts over a corpus; a
document's log importance weight is ``sum over its n-grams of log(p_target + 1e-8) - log(p_raw + 1e-8)``
(the package's ``log_diff`` dotted with the document's counts).

Cost: the package hashes every n-gram with SHA-256 in Python (about a microsecond each, twice: once to fit,
once to score). Here each batch's distinct words are found once (Arrow's dictionary encoding), and its
distinct word pairs once (``np.unique`` over pairs of word ids), and only those are hashed; everything per
n-gram after that is numpy (a gather, a ``bincount``). Memory is one batch's n-grams and a ``buckets``-long
count vector, whatever the corpus size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import regex

BUCKETS = 10_000  # the package's default num_buckets
SMOOTH = 1e-8  # added to both probabilities before the log, as the package does
# nltk WordPunctTokenizer, compiled with the `regex` engine as NLTK 3.10 does (its \w is not the stdlib's:
# superscript digits, for one, are not word characters there)
_WORDPUNCT = regex.compile(r"\w+|[^\w\s]+", regex.UNICODE | regex.MULTILINE | regex.DOTALL)


def words_of(text: str) -> list[str]:
    """The package's tokens of one text: lowercased, then NLTK's word-punct split."""
    return _WORDPUNCT.findall(text.lower())


def bucket_of(strings: Iterable[str], buckets: int) -> np.ndarray:
    """``int(sha256(s).hexdigest(), 16) % buckets`` of each string (the package's ``hash_buckets``)."""
    return np.fromiter((int.from_bytes(hashlib.sha256(s.encode("utf-8")).digest(), "big") % buckets
                        for s in strings), dtype=np.int64)


@dataclass(frozen=True)
class Ngrams:
    """A batch's hashed n-grams: each one's bucket and the index of its document in the batch, plus each
    document's word count (its unigrams)."""

    bucket: np.ndarray  # int64, unigrams then bigrams
    doc: np.ndarray  # int64, the same length
    words: np.ndarray  # int64, one per document


def ngrams(texts: Sequence[str | None], buckets: int = BUCKETS) -> Ngrams:
    """The unigram and bigram buckets of ``texts`` (None counts as empty); see the module docstring."""
    tokens = [words_of(t) if t else [] for t in texts]
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    doc = np.repeat(np.arange(len(tokens), dtype=np.int64), lengths)
    if not len(doc):
        return Ngrams(np.zeros(0, np.int64), doc, lengths)
    enc = pc.dictionary_encode(pa.array(list(chain.from_iterable(tokens)), type=pa.large_string()))
    ids = np.asarray(enc.indices, dtype=np.int64)
    uni = bucket_of(enc.dictionary.to_pylist(), buckets)[ids]
    pair = doc[:-1] == doc[1:]
    bi, bi_doc = _bigrams(ids[:-1][pair], ids[1:][pair], enc.dictionary, buckets), doc[:-1][pair]
    return Ngrams(np.concatenate([uni, bi]), np.concatenate([doc, bi_doc]), lengths)


def _bigrams(left: np.ndarray, right: np.ndarray, words: pa.Array, buckets: int) -> np.ndarray:
    """The buckets of the word pairs ``(words[left], words[right])``, each distinct pair hashed once."""
    if not len(left):
        return np.zeros(0, np.int64)
    key = left * len(words) + right
    distinct, where = np.unique(key, return_inverse=True)
    joined = pc.binary_join_element_wise(words.take(pa.array(distinct // len(words))),
                                         words.take(pa.array(distinct % len(words))),
                                         pa.scalar(" ", pa.large_string()))
    return bucket_of(joined.to_pylist(), buckets)[where]


def counts(texts: Sequence[str | None], buckets: int = BUCKETS) -> np.ndarray:
    """The bag-of-n-grams counts of ``texts`` (int64, ``buckets`` long): the package's ``_fit_bow``."""
    return np.bincount(ngrams(texts, buckets).bucket, minlength=buckets).astype(np.int64)


def log_ratio(target: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """``log p_target - log p_raw`` per bucket, smoothed as the package does (its ``log_diff``)."""
    t, r = target / max(int(target.sum()), 1), raw / max(int(raw.sum()), 1)
    return np.log(t + SMOOTH) - np.log(r + SMOOTH)


def log_weights(texts: Sequence[str | None], ratio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document's log importance weight and word count. A document's sum runs over its own n-grams in
    order, so it does not depend on the batch it is scored in."""
    g = ngrams(texts, len(ratio))
    return np.bincount(g.doc, weights=ratio[g.bucket], minlength=len(texts)), g.words


def gumbel(keys: Sequence[str], seed: int) -> np.ndarray:
    """A standard Gumbel draw per document, a function of ``(seed, key)`` alone (SHA-256 to a uniform in
    (0, 1)), so the draw is the same at any worker count, unit size or engine."""
    u = np.fromiter(((int.from_bytes(hashlib.sha256(f"{seed}\0{k}".encode()).digest()[:8], "big") >> 11) + 0.5
                     for k in keys), dtype=np.float64, count=len(keys)) / float(1 << 53)
    return -np.log(-np.log(u))
