"""py3langid's classifier over a whole batch at once, with numpy instead of a Python loop per byte.

py3langid walks each text's UTF-8 bytes through an Aho-Corasick automaton (one Python step per byte),
counts the byte n-gram features the states emit, and scores them with naive Bayes. The automaton's state
after byte *t* is the longest suffix of the text that is a prefix of some feature, so it depends only on
the last ``depth`` bytes (``depth``: the deepest state, 6 for the shipped model). The state of every
position of every text is therefore found with ``depth`` vectorised passes over the concatenated bytes,
each restarting from the root at the window's first byte (and never reading across a text boundary). The
tables are kept composed for those passes: for every (state, byte) the next state's row (``nextrow``) and the
feature that state emits (``emit``), so each pass is one gather and the last one yields the features.
Feature counts per text come from one sort; each text's naive-Bayes scores are its features' model rows
weighted and summed, then py3langid's own length temperature, softmax and alias folding. The labels are
py3langid's; the probabilities agree with it to float32 rounding (tested against
``LanguageIdentifier.classify``).

The probabilities are the same bits on every x86-64 CPU (and thread count): they go into the ledger, and a
run resumed on another machine, or spread over a Ray cluster of mixed machines, must write what one machine
would. So nothing here goes through BLAS (OpenBLAS picks its matrix-vector kernel by CPU model, and each
kernel sums in its own order) or numpy's SIMD ``log1p``/``exp`` (other routines on AVX-512, AVX2 and older
CPUs): the rows are summed one after another in feature order, ``log1p`` of the counts comes from the C
library's, and the softmax's ``exp`` is a double-precision polynomial made of IEEE additions and
multiplications (tested under every numpy dispatch level and several OpenBLAS kernels).

Memory: the model as float32 (about 57 MB) and two int32 automaton tables (about 80 MB), the :class:`Tables`,
plus about 40 bytes per input byte of a sub-batch (``chunk_bytes``, 1 MB by default: 4 MB cost a process's first
batch about 0.1 s more of system CPU, the first touch of 160 MB of temporaries, and sped nothing up after it). The
tables are memory-mapped from a cache that every process shares (:mod:`tokenmill.curate.filters.langid_cache`).
"""

from __future__ import annotations

import functools
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np


def _encode(text: str) -> bytes:
    """py3langid's own normalisation: lowercase an all-caps text, NFC, UTF-8."""
    if text.isupper():
        text = text.lower()
    return unicodedata.normalize("NFC", text).encode("utf8", errors="surrogatepass")


def automaton_depth(nextmove: np.ndarray, rowbase: np.ndarray) -> int:
    """The deepest state of the automaton (breadth-first, one vectorised level at a time)."""
    seen = np.zeros(len(rowbase), dtype=bool)
    seen[0] = True
    frontier, depth = np.array([0]), 0
    columns = np.arange(256, dtype=np.int64)
    while True:
        reached = np.zeros(len(rowbase), dtype=bool)
        for part in np.array_split(frontier, max(1, len(frontier) // 4096)):
            reached[nextmove[(rowbase[part].astype(np.int64)[:, None] + columns).ravel()]] = True
        nxt = np.flatnonzero(reached & ~seen)
        if len(nxt) == 0:
            return depth
        seen[nxt] = True
        frontier, depth = nxt, depth + 1


@dataclass(frozen=True, eq=False)
class Tables:
    """What :class:`BatchIdentifier` reads of a py3langid model: the automaton composed with itself, indexed by
    a state's row (its index shifted by 8) plus a byte: ``nextrow`` (the next state's row) and ``emit`` (the
    feature the next state emits, -1 for none), both int32, and ``root`` (the first state's row); its
    ``depth``; the naive-Bayes tables as float32 (``ptc``: feature x class, ``pc``), the class labels and
    py3langid's alias column pairs (first, duplicate)."""

    nextrow: np.ndarray
    emit: np.ndarray
    ptc: np.ndarray
    pc: np.ndarray
    classes: tuple[str, ...]
    alias_pairs: tuple[tuple[int, int], ...]
    depth: int
    root: int

    ARRAYS: ClassVar[tuple[str, ...]] = ("nextrow", "emit", "ptc", "pc")


def tables_of(ident: Any) -> Tables:
    """The tables of a loaded ``py3langid.langid.LanguageIdentifier`` (about 0.3 s of conversions)."""
    nextmove = np.asarray(ident.tk_nextmove).astype(np.int64)
    rowbase = np.asarray(ident.tk_row).astype(np.int64) << 8
    output = np.asarray(ident.tk_output).astype(np.int32)
    return Tables(rowbase[nextmove].astype(np.int32), output[nextmove],
                  np.asarray(ident.nb_ptc, dtype=np.float32), np.asarray(ident.nb_pc, dtype=np.float32),
                  tuple(ident.nb_classes), tuple((int(i), int(j)) for i, j in ident._alias_pairs),
                  automaton_depth(nextmove, rowbase), int(rowbase[0]))


class BatchIdentifier:
    """Classifies with a model's :class:`Tables` (or a ``LanguageIdentifier``, converted)."""

    def __init__(self, model: Any, *, chunk_bytes: int = 1 << 20):
        tables = model if isinstance(model, Tables) else tables_of(model)
        self.tables = tables
        self.ptc, self.pc, self.depth = tables.ptc, tables.pc, tables.depth
        self.classes = list(tables.classes)
        self.chunk_bytes = chunk_bytes

    def classify(self, texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """(label, probability) of every text, as ``LanguageIdentifier.classify`` gives them."""
        encoded = [_encode(t) for t in texts]
        labels: list[str] = []
        probs = np.empty(len(encoded), dtype=np.float64)
        start = 0
        while start < len(encoded):
            stop, size = start, 0
            while stop < len(encoded) and (stop == start or size + len(encoded[stop]) <= self.chunk_bytes):
                size += len(encoded[stop])
                stop += 1
            lab, p = self._classify(encoded[start:stop])
            labels += lab
            probs[start:stop] = p
            start = stop
        return labels, probs

    def _features(self, buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """The feature emitted after every byte (-1: none). Pass ``j`` (from ``depth - 1`` down to 0) feeds the
        byte ``j`` back (``buf`` shifted by ``j``) to the rows the previous pass reached; a window that would
        start before its text's first byte restarts at the root (the first ``j`` positions of each text, reset
        after the pass)."""
        t = self.tables
        row = np.full(len(buf), t.root, dtype=np.int32)
        idx = np.empty_like(row)
        heads = [starts[lens > k] + k for k in range(self.depth)]  # the k-th byte of every text that has one
        for j in range(self.depth - 1, 0, -1):
            idx[:j] = row[:j]
            np.add(row[j:], buf[:max(len(buf) - j, 0)], out=idx[j:])
            np.take(t.nextrow, idx, out=row, mode="clip")  # every index is in range; "clip" skips a copy of out
            for k in range(j):
                row[heads[k]] = t.root
        np.add(row, buf, out=idx)
        return np.take(t.emit, idx)

    def _classify(self, encoded: list[bytes]) -> tuple[list[str], np.ndarray]:
        n = len(encoded)
        lens = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=n)
        buf = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.int32)
        starts = np.cumsum(lens) - lens
        feature = self._features(buf, starts, lens)
        hit = feature >= 0
        seen = np.concatenate([[0], np.cumsum(hit)])
        doc = np.repeat(np.arange(n, dtype=np.int64), seen[starts + lens] - seen[starts])  # per feature emitted
        nfeat = self.ptc.shape[0]
        keys, counts = _counted(doc * nfeat + feature[hit])
        d, f = keys // nfeat, keys % nfeat
        weights = log1p_counts(counts)
        scores = np.zeros((n, self.ptc.shape[1]), dtype=np.float32)
        bounds = np.flatnonzero(np.r_[True, d[1:] != d[:-1]]) if len(d) else np.array([], dtype=np.int64)
        ends = np.r_[bounds[1:], len(d)]
        rows = np.empty((int((ends - bounds).max(initial=0)), self.ptc.shape[1]), dtype=np.float32)
        for lo, hi in zip(bounds.tolist(), ends.tolist()):
            part = rows[:hi - lo]  # one buffer for every text's rows of the model: no allocation per text
            np.take(self.ptc, f[lo:hi], axis=0, out=part, mode="clip")  # in range; "clip": no copy of out
            part *= weights[lo:hi, None]
            np.add.reduce(part, axis=0, out=scores[d[lo]])  # row after row, in feature order
        scores[d[bounds]] += self.pc  # featureless texts keep all-zero scores: a uniform distribution, as in py3langid
        scores *= (1.0 / np.sqrt(np.maximum(lens, 1))).astype(np.float32)[:, None]
        scores = exp_nonpositive(scores - scores.max(axis=1, keepdims=True))
        total = np.zeros(n, dtype=np.float32)
        for j in range(scores.shape[1]):  # class after class: the same order on every CPU
            total += scores[:, j]
        scores /= total[:, None]
        for i, j in self.tables.alias_pairs:
            scores[:, i] += scores[:, j]
            scores[:, j] = 0.0
        best = scores.argmax(axis=1)
        return [self.classes[k] for k in best], scores[np.arange(n), best].astype(np.float64)


def _counted(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_counts=True)``, from one sort. The keys come text after text, each text's in a
    range of its own: numpy's stable sort (timsort) merges those ranges almost for free, in about half the
    time of the default quicksort (2.3 million keys of 1,281 real pages); any sort gives the same array."""
    if len(keys) == 0:
        return keys, np.zeros(0, dtype=np.int64)
    keys = np.sort(keys, kind="stable")
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[first], np.diff(np.r_[first, len(keys)])


@functools.lru_cache(maxsize=4)
def _log1p_table(size: int) -> np.ndarray:
    return np.array([math.log1p(k) for k in range(size)], dtype=np.float64).astype(np.float32)


def log1p_counts(counts: np.ndarray) -> np.ndarray:
    """``log1p`` of whole counts as float32, from the C library's double ``log1p`` (numpy's float32 ``log1p`` is
    a different SIMD routine on AVX-512 and AVX2 CPUs, so its bits depend on the machine)."""
    top = int(counts.max(initial=0)) + 1
    size = 1 << max(12, (top - 1).bit_length())
    return _log1p_table(size)[counts]


_LN2_HI, _LN2_LO = 0.6931471803691238, 1.9082149292705877e-10  # ln 2 split so that k * _LN2_HI is exact
_EXP_TERMS = tuple(1.0 / math.factorial(k) for k in range(13, -1, -1))


def exp_nonpositive(x: np.ndarray) -> np.ndarray:
    """``exp(x)`` for float32 ``x <= 0``, as float32, with the same bits on every CPU: double-precision range
    reduction and Taylor polynomial from IEEE additions and multiplications only, then one rounding to float32
    (numpy's own ``exp`` takes another code path on CPUs without FMA, and on AVX-512 in double precision)."""
    v = np.maximum(x.astype(np.float64), -150.0)  # below about -104 the float32 result is 0 anyway
    k = np.floor(v * (1.0 / math.log(2)) + 0.5)
    r = (v - k * _LN2_HI) - k * _LN2_LO  # |r| <= ln 2 / 2 (plus rounding)
    p = np.full_like(r, _EXP_TERMS[0])
    for c in _EXP_TERMS[1:]:
        p *= r
        p += c
    return np.ldexp(p, k.astype(np.int32)).astype(np.float32)
