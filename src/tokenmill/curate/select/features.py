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
distinct word pairs once (a dictionary encoding of pairs of word ids), and of those only the ones a process
has not met before are hashed (:class:`BucketCache`); everything per n-gram after that is numpy (a gather, a
``bincount``). Memory is one batch's n-grams, the bounded cache and a ``buckets``-long count vector, whatever
the corpus size.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import re
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
    """``int(sha256(s).hexdigest(), 16) % buckets`` of each string (the package's ``hash_buckets``), as a chain
    of ``map`` over C functions: no Python frame per string (the hash itself is then most of the cost)."""
    digests = map(_DIGEST, map(hashlib.sha256, map(str.encode, strings)))
    return np.fromiter(map(buckets.__rmod__, map(_BIG_ENDIAN, digests)), dtype=np.int64)


_DIGEST = operator.methodcaller("digest")
_BIG_ENDIAN = functools.partial(int.from_bytes, byteorder="big")
CACHE_SIZE = 1 << 20  # words, and word pairs, whose bucket a process remembers (about 40 MB in all)


def fingerprint(strings: pa.Array) -> np.ndarray:
    """A 64-bit polynomial hash of each string's UTF-8 bytes, in numpy (a few passes over the bytes): where
    to look a string up in :class:`BucketCache`, which then compares the strings themselves, so a collision
    costs speed, never a wrong bucket. Not the buckets' hash (that stays SHA-256)."""
    strings = strings.cast(pa.large_string())
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset:strings.offset + len(strings) + 1]
    lengths = np.diff(offsets)
    hashed = lengths.astype(np.uint64)
    solid = lengths > 0
    if solid.any():
        data = np.frombuffer(strings.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]].astype(np.uint64) + 1
        powers = np.cumprod(np.full(int(lengths.max()), _MULTIPLIER, dtype=np.uint64))
        from_end = np.repeat(offsets[1:] - offsets[0], lengths) - np.arange(1, len(data) + 1)  # 0 at a last byte
        hashed[solid] ^= np.add.reduceat(data * powers[from_end], (offsets[:-1] - offsets[0])[solid])
    return hashed


_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


class BucketCache:
    """The buckets of the words and word pairs a process has already hashed, so that each is hashed once per
    process rather than once per batch (the common ones recur in every batch), looked up without rebuilding
    anything per batch.

    Words: their strings in one Arrow array (a word's place there is its cache id), their buckets, and their
    :func:`fingerprint` s sorted, found with ``np.searchsorted`` and confirmed by comparing the strings
    (a batch holding a word whose fingerprint another word has is featurised without the cache). Pairs: the
    two words' cache ids in one int64, sorted, with the pair's bucket. No Python object per entry (about 40
    bytes a word, 16 a pair). Bounded: past ``size`` words the cache starts over empty, past ``size`` pairs
    the pairs do, so memory stays flat at any corpus size."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._forget(0)

    def lookup(self, words: pa.Array, left: np.ndarray, right: np.ndarray, buckets: int) -> tuple[np.ndarray, np.ndarray]:
        """The buckets of the distinct ``words`` and of the pairs ``(words[left], words[right])`` (each pair
        once), as :func:`bucket_of` gives them, hashing only those not already held."""
        words = words.cast(pa.large_string())
        if buckets != self.buckets:  # another bucket count: the held buckets mean nothing for it
            self._forget(buckets)
        ids = self._word_ids(words)
        if ids is None:
            return bucket_of(words.to_pylist(), buckets), bucket_of(_joined(words, left, right).to_pylist(), buckets)
        return self.word_bucket[ids], self._pair_buckets(words, ids, left, right)

    def _word_ids(self, words: pa.Array) -> np.ndarray | None:
        """Each word's cache id, the new ones hashed and added; None when two words share a fingerprint."""
        key = fingerprint(words)
        hit, ids = _find(self.word_key, self.word_at, key)
        if hit.any() and not pc.all(pc.equal(words.filter(pa.array(hit)), self.words.take(pa.array(ids[hit])))).as_py():
            return None
        new = np.nonzero(~hit)[0]
        if len(np.unique(key[new])) < len(new):
            return None
        if len(self.words) + len(new) > self.size:
            self._forget(self.buckets)
            return self._word_ids(words) if len(words) <= self.size else None
        ids[new] = np.arange(len(self.words), len(self.words) + len(new))
        fresh = words.take(pa.array(new))
        self.words = pa.concat_arrays([self.words, fresh])
        self.word_bucket = np.concatenate([self.word_bucket, bucket_of(fresh.to_pylist(), self.buckets)])
        self.word_key, self.word_at = _merged(self.word_key, self.word_at, key[new], ids[new])
        return ids

    def _pair_buckets(self, words: pa.Array, ids: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        key = ids[left] << 32 | ids[right]  # ids < size < 2**31
        hit, found = _find(self.pair_key, self.pair_bucket, key)
        new = np.nonzero(~hit)[0]
        if len(new):
            found[new] = bucket_of(_joined(words, left[new], right[new]).to_pylist(), self.buckets)
            if len(self.pair_key) + len(new) > self.size:
                self.pair_key, self.pair_bucket = np.zeros(0, np.int64), np.zeros(0, np.int64)
            if len(new) <= self.size:
                self.pair_key, self.pair_bucket = _merged(self.pair_key, self.pair_bucket, key[new], found[new])
        return found

    def _forget(self, buckets: int) -> None:
        self.buckets, self.words = buckets, pa.array([], pa.large_string())
        self.word_key, self.word_at, self.word_bucket = np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        self.pair_key, self.pair_bucket = np.zeros(0, np.int64), np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self.words) + len(self.pair_key)


def _find(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each of ``query`` is in ``keys`` (sorted) and its value there (-1 where not)."""
    if not len(keys):
        return np.zeros(len(query), bool), np.full(len(query), -1, np.int64)
    order = np.argsort(query)
    at = np.empty(len(query), np.int64)
    at[order] = np.minimum(np.searchsorted(keys, query[order]), len(keys) - 1)  # in order: numpy's search
    hit = keys[at] == query
    return hit, np.where(hit, values[at], -1)


def _merged(keys: np.ndarray, values: np.ndarray, new_keys: np.ndarray, new_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``keys`` (sorted, distinct) with ``new_keys`` (distinct, none in ``keys``) put in their places."""
    order = np.argsort(new_keys)
    at = np.searchsorted(keys, new_keys[order])
    return np.insert(keys, at, new_keys[order]), np.insert(values, at, new_values[order])


def _joined(words: pa.Array, left: np.ndarray, right: np.ndarray) -> pa.Array:
    """``words[left] + " " + words[right]``: the package's bigram strings."""
    return pc.binary_join_element_wise(words.take(pa.array(left)), words.take(pa.array(right)),
                                       pa.scalar(" ", pa.large_string()))


_CACHE = BucketCache()


@dataclass(frozen=True)
class Ngrams:
    """A batch's hashed n-grams: each one's bucket and the index of its document in the batch, plus each
    document's word count (its unigrams)."""

    bucket: np.ndarray  # int64, unigrams then bigrams
    doc: np.ndarray  # int64, the same length
    words: np.ndarray  # int64, one per document


def ngrams(texts: Sequence[str | None] | pa.Array, buckets: int = BUCKETS) -> Ngrams:
    """The unigram and bigram buckets of ``texts`` (None counts as empty); see the module docstring."""
    tokens, doc, lengths = tokenize(texts)
    if not len(doc):
        return Ngrams(np.zeros(0, np.int64), doc, lengths)
    enc = pc.dictionary_encode(tokens)
    ids = np.asarray(enc.indices, dtype=np.int64)
    pair = doc[:-1] == doc[1:]
    left, right = ids[:-1][pair], ids[1:][pair]
    pairs = pc.dictionary_encode(pa.array(left * len(enc.dictionary) + right))  # a hash table: no sort
    distinct, where = np.asarray(pairs.dictionary), np.asarray(pairs.indices)
    uni, bi = _CACHE.lookup(enc.dictionary, distinct // len(enc.dictionary), distinct % len(enc.dictionary), buckets)
    return Ngrams(np.concatenate([uni[ids], bi[where]]), np.concatenate([doc, doc[:-1][pair]]), lengths)


def tokenize(texts: Sequence[str | None] | pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Every document's tokens (:func:`words_of`) in one array, each token's document, each document's count.

    Documents whose lowercase (Python's, a document at a time) holds only code points below
    :data:`FAST_BELOW` are split with numpy: each code point's class (word, other, space) looked up in a
    table of the ``regex`` engine's own answers (:func:`fast_table`), a token being a run of one class within
    a document. The rest (CJK, emoji) by ``regex`` itself.
    """
    values = texts.to_pylist() if isinstance(texts, pa.Array) else list(texts)  # pyright: ignore[reportAttributeAccessIssue] (pyarrow is untyped: isinstance narrows nothing)
    lowered = [(t or "").lower() for t in values]  # a document at a time, as words_of (final sigma)
    slow = np.fromiter((_BEYOND.search(lo) is not None for lo in lowered), dtype=bool, count=len(lowered))
    fast_at, slow_at = np.nonzero(~slow)[0], np.nonzero(slow)[0]
    parts = [_split_table([lowered[i] for i in fast_at], fast_at, fast_table()),
             _split_slow([values[i] or "" for i in slow_at], slow_at)]  # slow ones are not empty
    lengths = np.zeros(len(values), dtype=np.int64)
    for _, d in parts:
        lengths += np.bincount(d, minlength=len(values))
    return pa.concat_arrays([t for t, _ in parts]), np.concatenate([d for _, d in parts]), lengths


FAST_BELOW = 0x10000  # the Basic Multilingual Plane
_BEYOND = re.compile("[^\\x00-\\ud7ff\\ue000-\\uffff]")  # a code point the table does not hold
SPACE, WORD, OTHER = 0, 1, 2


def _split_table(lowered: list[str], where: np.ndarray, table: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Tokens of already lowercased documents whose code points are all in ``table``: runs of one class
    (word or other) within a document, cut out of the UTF-8 bytes without the spaces. The work is on the
    UTF-8 bytes, each taking its code point's class (a run of code points of one class is a run of their
    bytes): ASCII text, the common case, is never widened, and the temporaries are a few bytes per byte."""
    joined = "".join(lowered)
    if not joined:
        return pa.array([], type=pa.large_string()), np.zeros(0, np.int64)
    raw = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
    cls = table[raw]  # right for ASCII, the common case; the other bytes are set below
    sizes = np.fromiter(map(len, lowered), dtype=np.int64, count=len(lowered))  # code points, then bytes
    if len(raw) > len(joined):
        cp = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
        wide = np.flatnonzero(cp >= 0x80)
        width = _utf8_width(cp[wide])
        cls[raw >= 0x80] = np.repeat(table[cp[wide]], width)  # each byte of a code point takes its class
        of = np.searchsorted(np.cumsum(sizes), wide, side="right")
        sizes += np.bincount(of, weights=width - 1, minlength=len(sizes)).astype(np.int64)
    first = np.zeros(len(lowered) + 1, dtype=np.int64)
    np.cumsum(sizes, out=first[1:])
    solid = cls != SPACE
    start = solid.copy()
    start[1:] &= cls[1:] != cls[:-1]
    heads = first[:-1][sizes > 0]
    start[heads] = solid[heads]  # a document's first code point starts a token, whatever came before it
    at = np.flatnonzero(start)
    data = raw[solid]
    offsets = np.append(np.flatnonzero(start[solid]), len(data))
    tokens = pa.LargeStringArray.from_buffers(len(at), pa.py_buffer(offsets), pa.py_buffer(data))
    return tokens, where[np.searchsorted(first, at, side="right") - 1]


def _utf8_width(cp: np.ndarray) -> np.ndarray:
    """Bytes of each code point below U+10000 in UTF-8."""
    return 1 + (cp >= 0x80).view(np.uint8) + (cp >= 0x800).view(np.uint8)


def _split_slow(texts: list[str], where: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    tokens = [words_of(t) for t in texts]
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    return pa.array(list(chain.from_iterable(tokens)), type=pa.large_string()), np.repeat(where, lengths)


@functools.cache
def fast_table() -> np.ndarray:
    """The class of every code point below :data:`FAST_BELOW` as the ``regex`` engine answers for ``\\w``
    and ``\\s`` (a few milliseconds, once per process): by construction the split of :func:`words_of`."""
    chars = "".join(chr(c) for c in range(FAST_BELOW))
    table = np.full(FAST_BELOW, OTHER, dtype=np.uint8)
    table[[ord(c) for c in regex.findall(r"\w", chars)]] = WORD
    table[[ord(c) for c in regex.findall(r"\s", chars)]] = SPACE
    return table


def counts(texts: Sequence[str | None], buckets: int = BUCKETS) -> np.ndarray:
    """The bag-of-n-grams counts of ``texts`` (int64, ``buckets`` long): the package's ``_fit_bow``."""
    return np.bincount(ngrams(texts, buckets).bucket, minlength=buckets).astype(np.int64)


def log_ratio(target: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """``log p_target - log p_raw`` per bucket, smoothed as the package does (its ``log_diff``)."""
    t, r = target / max(int(target.sum()), 1), raw / max(int(raw.sum()), 1)
    return np.log(t + SMOOTH) - np.log(r + SMOOTH)


def by_document(g: Ngrams) -> tuple[np.ndarray, np.ndarray]:
    """The batch's buckets grouped by document (each document's unigrams, then its bigrams, in order) and the
    number of n-grams of each document: what a document's weight is summed from, in this order."""
    order = np.argsort(g.doc, kind="stable")  # two sorted runs: a merge
    return g.bucket[order], np.bincount(g.doc, minlength=len(g.words))


def weights_of(bucket: np.ndarray, per_doc: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """Each document's log importance weight: the sum of ``ratio`` over its n-grams, in order, so that it does
    not depend on the batch the document was featurised in."""
    doc = np.repeat(np.arange(len(per_doc)), per_doc)
    return np.bincount(doc, weights=ratio[np.asarray(bucket, dtype=np.int64)], minlength=len(per_doc))


def log_weights(texts: Sequence[str | None], ratio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document's log importance weight and word count."""
    g = ngrams(texts, len(ratio))
    return weights_of(*by_document(g), ratio), g.words


def gumbel(keys: Sequence[str], seed: int) -> np.ndarray:
    """A standard Gumbel draw per document, a function of ``(seed, key)`` alone (SHA-256 to a uniform in
    (0, 1)), so the draw is the same at any worker count, unit size or engine."""
    u = np.fromiter(((int.from_bytes(hashlib.sha256(f"{seed}\0{k}".encode()).digest()[:8], "big") >> 11) + 0.5
                     for k in keys), dtype=np.float64, count=len(keys)) / float(1 << 53)
    return -np.log(-np.log(u))
