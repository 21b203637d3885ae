r"""Word n-gram hashes of a whole batch of texts, vectorised (Arrow for splitting, numpy for hashing).

Normalisation: lower case; every run of Unicode punctuation or symbols (``\p{P}``, ``\p{S}``) becomes
one space; words are what whitespace separates. A word's hash is a polynomial hash of its UTF-8 bytes
(``sum(b[k] * P**k) mod 2**64``, finished with the splitmix64 mixer and its length), computed for every
distinct word of the batch at once (Arrow's dictionary encoding, then prefix sums over the bytes); an
n-gram's hash is the polynomial ``sum(h[i + j] * P**j) mod 2**64`` over its words, computed with ``n``
vector operations over the batch's flat word array. Cost: three Arrow passes (lower, regex, split) over
the text, a few numpy passes over the distinct words' bytes, ``n`` numpy passes over all words; no
Python per word or per document.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

P = np.uint64(0x100000001B3)  # the 64-bit FNV prime: odd, so multiplication is a bijection mod 2**64


@dataclass(frozen=True)
class Words:
    hashes: np.ndarray  # uint64, one per word, all texts concatenated
    offsets: np.ndarray  # int64, len(texts) + 1: text i has words offsets[i]:offsets[i+1]


def _as_array(texts: pa.Array | pa.ChunkedArray | list) -> pa.Array:
    """``texts`` as one Arrow array (a list of strings becomes a ``large_string`` one)."""
    if isinstance(texts, pa.ChunkedArray):  # pyarrow's classes are untyped: isinstance narrows nothing here
        return texts.combine_chunks()  # pyright: ignore[reportAttributeAccessIssue]
    if isinstance(texts, pa.Array):
        return texts
    return pa.array(texts, type=pa.large_string())


def words(texts: pa.Array | list) -> Words:
    arr = _as_array(texts)
    arr = pc.utf8_lower(pc.fill_null(arr.cast(pa.large_string()), ""))
    arr = pc.utf8_trim_whitespace(pc.replace_substring_regex(arr, r"[\p{P}\p{S}]+", " "))
    lists = pc.utf8_split_whitespace(arr)
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    flat = lists.flatten()
    if len(flat) == 0:
        return Words(np.zeros(0, dtype=np.uint64), offsets - offsets[0])
    enc = pc.dictionary_encode(flat)
    table = hash_strings(enc.dictionary)
    return Words(table[np.asarray(enc.indices, dtype=np.int64)], offsets - offsets[0])


_INV_P = np.uint64(pow(int(P), -1, 1 << 64))


def hash_strings(arr: pa.Array) -> np.ndarray:
    """A 64-bit hash of each string's UTF-8 bytes, vectorised (see the module docstring)."""
    arr = arr.cast(pa.large_string())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    base = offsets[0]
    seg = data[base:offsets[-1]].astype(np.uint64)
    with np.errstate(over="ignore"):
        pw = np.cumprod(np.concatenate([[np.uint64(1)], np.full(len(seg), P, dtype=np.uint64)]))
        inv = np.cumprod(np.concatenate([[np.uint64(1)], np.full(len(seg), _INV_P, dtype=np.uint64)]))
        prefix = np.concatenate([[np.uint64(0)], np.cumsum(seg * pw[:-1], dtype=np.uint64)])
        start, end = offsets[:-1] - base, offsets[1:] - base
        h = (prefix[end] - prefix[start]) * inv[start]
        return _mix(h ^ (np.asarray(end - start, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit moves every output bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def ngram_hashes(w: Words, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of every n-gram that lies inside one text, and the index of the text each belongs to."""
    total = len(w.hashes)
    if total < n:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    m = total - n + 1
    acc = np.zeros(m, dtype=np.uint64)
    power = np.uint64(1)
    with np.errstate(over="ignore"):
        for j in range(n):
            acc += w.hashes[j:j + m] * power
            power = power * P
    doc = np.repeat(np.arange(len(w.offsets) - 1, dtype=np.int64), np.diff(w.offsets))[:m]
    inside = np.arange(m, dtype=np.int64) + n <= w.offsets[doc + 1]
    return acc[inside], doc[inside]


def whole_hashes(w: Words) -> tuple[np.ndarray, np.ndarray]:
    """One hash per text over all its words (the n-gram hash with n = its length), with each text's length."""
    lengths = np.diff(w.offsets)
    out = np.zeros(len(lengths), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i, (a, b) in enumerate(zip(w.offsets[:-1], w.offsets[1:])):
            if b == a:
                continue
            powers = np.cumprod(np.concatenate([[np.uint64(1)], np.full(b - a - 1, P, dtype=np.uint64)]))[: b - a]
            out[i] = np.sum(w.hashes[a:b] * powers, dtype=np.uint64)
    return out, lengths


@dataclass(frozen=True)
class WordPieces:
    """Texts as whitespace-separated words, each word the normalised pieces its punctuation splits it into
    (``37.5°C`` is one word of pieces ``37``, ``5``, ``c``); words with no piece (a lone ``+``) are left out."""

    hashes: np.ndarray  # uint64, one per piece, all texts concatenated
    word_starts: np.ndarray  # int64, n_words + 1: word w has pieces word_starts[w]:word_starts[w + 1]
    offsets: np.ndarray  # int64, len(texts) + 1: text i has words offsets[i]:offsets[i + 1]
    prefix: np.ndarray = field(init=False, repr=False)  # uint64, n_pieces + 1: sum of hashes[j] * P**j, j < i
    inverse: np.ndarray = field(init=False, repr=False)  # uint64, n_pieces + 1: P**-i

    def __post_init__(self) -> None:
        with np.errstate(over="ignore"):
            n = len(self.hashes)
            pw = np.cumprod(np.concatenate([[np.uint64(1)], np.full(n, P, dtype=np.uint64)]))
            inv = np.cumprod(np.concatenate([[np.uint64(1)], np.full(n, _INV_P, dtype=np.uint64)]))
            prefix = np.concatenate([[np.uint64(0)], np.cumsum(self.hashes * pw[:-1], dtype=np.uint64)])
        object.__setattr__(self, "prefix", prefix)
        object.__setattr__(self, "inverse", inv)


def word_pieces(texts: pa.Array | list) -> WordPieces:
    """:class:`WordPieces` of ``texts``: the normalisation of :func:`words`, grouped by whitespace word."""
    arr = _as_array(texts)
    # one regex pass over whole texts marks the cuts (\x01 is no whitespace), then two literal splits
    marked = pc.replace_substring_regex(pc.utf8_lower(pc.fill_null(arr.cast(pa.large_string()), "")),
                                        r"[\p{P}\p{S}]+", "\x01")
    spaced = pc.utf8_split_whitespace(marked)
    text_words = np.asarray(spaced.offsets, dtype=np.int64)
    pieces = pc.split_pattern(spaced.flatten(), "\x01")
    flat = pieces.flatten()
    nonempty = np.asarray(pc.greater(pc.utf8_length(flat), 0), dtype=bool)  # "" and "+" split to [""]
    bounds = np.asarray(pieces.offsets, dtype=np.int64)
    counted = np.concatenate([[0], np.cumsum(nonempty)])
    per_word = counted[bounds[1:] - bounds[0]] - counted[bounds[:-1] - bounds[0]]
    flat = flat.filter(pa.array(nonempty))
    keep = per_word > 0
    kept_before = np.concatenate([[0], np.cumsum(keep)])  # kept words before each (original) word index
    offsets = kept_before[text_words - text_words[0]]
    word_starts = np.concatenate([[0], np.cumsum(per_word[keep])]).astype(np.int64)
    if len(flat) == 0:
        return WordPieces(np.zeros(0, dtype=np.uint64), word_starts, offsets)
    enc = pc.dictionary_encode(flat)
    return WordPieces(hash_strings(enc.dictionary)[np.asarray(enc.indices, dtype=np.int64)], word_starts, offsets)


def span_hashes(w: WordPieces, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The hash of the pieces of every ``k`` consecutive words inside one text (the n-gram hash of those pieces,
    as :func:`ngram_hashes` computes it), and the index of the text each belongs to.

    Cost: one prefix sum over the pieces (``S[i] = sum h[j] P**j``); a span ``[a, b)`` is then
    ``(S[b] - S[a]) * P**-a``, two gathers per span, whatever its length.
    """
    n_words = len(w.word_starts) - 1
    if n_words < k or k < 1:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    text = np.repeat(np.arange(len(w.offsets) - 1, dtype=np.int64), np.diff(w.offsets))
    first = np.arange(n_words - k + 1, dtype=np.int64)
    inside = first + k <= w.offsets[text[first] + 1]
    first = first[inside]
    a, b = w.word_starts[first], w.word_starts[first + k]
    return _range_hashes(w, a, b), text[first]


def whole_spans(w: WordPieces) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One hash per text over all its pieces (:func:`span_hashes` with ``k`` = its word count), its word count
    and its piece count."""
    a, b = w.word_starts[w.offsets[:-1]], w.word_starts[w.offsets[1:]]
    return _range_hashes(w, a, b), np.diff(w.offsets), b - a


def _range_hashes(w: WordPieces, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (w.prefix[b] - w.prefix[a]) * w.inverse[a]
