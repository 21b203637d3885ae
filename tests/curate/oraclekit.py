"""The straightforward implementations the heuristic steps' fast paths replaced, kept as their oracles.

Each function here is the code as it stood before a speed-up, verbatim but for names; the equivalence tests
(``test_fast_paths.py``) compare the shipped steps against them value for value, float bits included.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.curate.filters.heuristics import text as T
from tokenmill.curate.filters.heuristics.refinedweb import COUNTER, SUBSTRINGS, RefinedWeb
from tokenmill.curate.filters.heuristics.text import Pieces, join_lines, ratio, split, text_column
from tokenmill.curate.filters.langid_batch import BatchIdentifier, exp_nonpositive
from tokenmill.steps.contract import Scored


def alnum_words(text: pa.Array) -> np.ndarray:
    w = split_words(text)
    starts = np.asarray(pc.match_substring_regex(w.values, r"^[\pL\pN]"), dtype=bool)
    return np.bincount(w.parents, weights=starts, minlength=len(text)).astype(np.int64)


def refinedweb_score(step: RefinedWeb, batch: pa.RecordBatch) -> Scored:
    """``RefinedWeb.score`` splitting the words of the whole text before and after the line rules."""
    text = pc.replace_substring_regex(text_column(batch), r"\n{3,}", "\n\n")
    before = alnum_words(text)
    lines = split(text, "\n")
    values, drop, counts = line_rules(step, lines)
    new_text = join_lines(Pieces(values, lines.parents, lines.counts).where(~drop))
    after = alnum_words(new_text)
    return Scored({
        "words_before": before,
        "words_after": after,
        "word_removal_ratio": ratio(before - after, before),
        "chars_after": np.asarray(pc.utf8_length(new_text), dtype=np.int64),
    }, text=new_text, counts=counts)


def line_rules(step: RefinedWeb, lines: Pieces) -> tuple[pa.Array, np.ndarray, Counter]:
    """``RefinedWeb._line_rules`` recounting every line's words before each substring rule."""
    values = lines.values
    length = lines.lengths()
    nonempty = length > 0
    rules: dict[str, np.ndarray] = {}
    if step.max_uppercase_ratio is not None:
        upper = np.asarray(pc.count_substring_regex(values, r"\p{Lu}"), dtype=np.int64)
        rules["uppercase"] = nonempty & (ratio(upper, length) > step.max_uppercase_ratio)
    if step.max_numeric_ratio is not None:
        digits = np.asarray(pc.count_substring_regex(values, r"\p{Nd}"), dtype=np.int64)
        rules["numeric"] = nonempty & (ratio(digits, length) > step.max_numeric_ratio)
    if step.remove_counters:
        rules["counter"] = np.asarray(pc.match_substring_regex(values, COUNTER), dtype=bool)
    n_words = T.from_lists(pc.utf8_split_whitespace(values)).counts
    if step.min_line_words is not None:
        rules["too_few_words"] = nonempty & (n_words < step.min_line_words)
    drop = np.zeros(len(values), dtype=bool)
    counts: Counter = Counter()
    for rule, mask in rules.items():
        counts[f"line_{rule}"] = int((mask & ~drop).sum())
        drop |= mask
    if step.remove_substrings:
        for pattern, rule in SUBSTRINGS:
            short = ~drop & (T.from_lists(pc.utf8_split_whitespace(values)).counts <= 10)
            new = pc.replace_substring_regex(values, pattern, "")
            changed = short & ~np.asarray(pc.equal(new, values), dtype=bool)
            blank = changed & (np.asarray(pc.utf8_length(pc.utf8_trim_whitespace(new)), dtype=np.int64) == 0)
            counts[f"line_{rule}"] += int(changed.sum())
            values = pc.if_else(pa.array(changed), new, values)
            drop = drop | blank
    return values, drop, +counts


def quality_normalise(texts: pa.Array) -> pa.Array:
    """``tokenmill.curate.quality.classifier.normalise`` collapsing every ``\\s+`` run, single spaces included."""
    arr = pc.utf8_lower(pc.fill_null(texts, ""))
    arr = pc.replace_substring_regex(arr, r"([.,!?;:()\[\]{}\"“”«»])", r" \1 ")
    return pc.utf8_trim_whitespace(pc.replace_substring_regex(arr, r"\s+", " "))


class ReferenceIdentifier(BatchIdentifier):
    """The batched identifier with its first state passes (py3langid's own automaton tables, two gathers per
    pass, masks by offset), one model copy per text and its rows summed one by one in a Python loop (the
    softmax's ``exp`` is the shipped one, tested on its own against ``math.exp``)."""

    def __init__(self, ident, **kwargs):
        super().__init__(ident, **kwargs)
        self.nextmove = np.asarray(ident.tk_nextmove).astype(np.int64)
        self.rowbase = np.asarray(ident.tk_row).astype(np.int64) << 8
        self.output = np.asarray(ident.tk_output).astype(np.int64)

    def _states(self, buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
        offset = np.arange(len(buf), dtype=np.int64) - np.repeat(starts, lens)
        pos = np.arange(len(buf), dtype=np.int64)
        state = np.zeros(len(buf), dtype=np.int32)
        for j in range(self.depth - 1, -1, -1):
            ok = offset >= j
            b = buf[np.where(ok, pos - j, 0)]
            state = self.nextmove[self.rowbase[state] + b]
            state[~ok] = 0
        return state

    def _classify(self, encoded: list[bytes]) -> tuple[list[str], np.ndarray]:
        n = len(encoded)
        lens = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=n)
        buf = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.int32)
        starts = np.cumsum(lens) - lens
        doc = np.repeat(np.arange(n, dtype=np.int64), lens)
        feature = self.output[self._states(buf, starts, lens)]
        hit = feature >= 0
        nfeat = self.ptc.shape[0]
        keys, counts = np.unique(doc[hit] * nfeat + feature[hit], return_counts=True)
        d, f = keys // nfeat, keys % nfeat
        weights = np.array([np.float32(math.log1p(c)) for c in counts.tolist()], dtype=np.float32)
        scores = np.zeros((n, self.ptc.shape[1]), dtype=np.float32)
        bounds = np.flatnonzero(np.r_[True, d[1:] != d[:-1]]) if len(d) else np.array([], dtype=np.int64)
        ends = np.r_[bounds[1:], len(d)]
        for lo, hi in zip(bounds.tolist(), ends.tolist()):
            acc = np.zeros(self.ptc.shape[1], dtype=np.float32)
            for i in range(lo, hi):  # each feature's row, weighted, added in feature order
                acc += weights[i] * self.ptc[f[i]]
            scores[d[lo]] = acc + self.pc
        scores *= (1.0 / np.sqrt(np.maximum(lens, 1))).astype(np.float32)[:, None]
        scores = exp_nonpositive(scores - scores.max(axis=1, keepdims=True))
        total = np.zeros(n, dtype=np.float32)
        for j in range(scores.shape[1]):
            total += scores[:, j]
        scores /= total[:, None]
        for i, j in self.tables.alias_pairs:
            scores[:, i] += scores[:, j]
            scores[:, j] = 0.0
        best = scores.argmax(axis=1)
        return [self.classes[k] for k in best], scores[np.arange(n), best].astype(np.float64)


def split_words(text: pa.Array, *, counts_only: bool = False):
    """``text.split_words`` splitting every chunk occurrence (no sharing between equal chunks)."""
    chunks = T.from_lists(pc.utf8_split_whitespace(text))
    values = chunks.values.cast(pa.large_string())
    nbytes = np.asarray(pc.binary_length(values), dtype=np.int64)
    start = T._offsets(values)[:-1]
    left = pc.utf8_ltrim(values, characters=T.EDGE_CHARS)
    core = pc.utf8_rtrim(left, characters=T.EDGE_CHARS + ".")
    pre_b = nbytes - np.asarray(pc.binary_length(left), dtype=np.int64)
    core_b = np.asarray(pc.binary_length(core), dtype=np.int64)
    suf_b = nbytes - pre_b - core_b
    take_period = T._period_first(values, start + pre_b + core_b, suf_b)
    take_period[take_period] = T._match(core.filter(pa.array(take_period)), T._KEEPS_PERIOD)
    if take_period.any():
        dot = pa.scalar(".", core.type)
        with_period = pc.binary_join_element_wise(core.filter(pa.array(take_period)), dot, pa.scalar("", core.type))
        core = pc.replace_with_mask(core, pa.array(take_period), with_period)
    core_b, suf_b = core_b + take_period, suf_b - take_period
    data = T._data(values)
    stem, clitic = T._clitic_split(core)
    rows = np.arange(len(nbytes))
    parts = [
        T._symbol_tokens(T._slice(data, start, pre_b)),
        infix_split(Pieces(stem, rows, np.ones(len(rows), dtype=np.int64))),
        clitic,
        T._symbol_tokens(T._slice(data, start + pre_b + core_b, suf_b)),
    ]
    if counts_only:
        per_chunk = sum(p.counts for p in parts)
        return np.bincount(chunks.parents, weights=per_chunk, minlength=chunks.n_rows).astype(np.int64)
    return T._assemble(parts, chunks)


def infix_split(cores: Pieces) -> Pieces:
    """``text._infix_split`` with two replacement passes of every infix rule over every candidate core."""
    cores = T._nonempty(cores)
    todo = T._match(cores.values, T._INFIX_CANDIDATE)
    todo[todo] = ~T._match(cores.values.filter(pa.array(todo)), T._URL)
    if not todo.any():
        return cores
    sub = cores.values.filter(pa.array(todo))
    for pattern, repl in T.INFIXES:
        for _ in range(2):
            sub = pc.replace_substring_regex(sub, pattern, repl)
    pieces = T.from_lists(pc.split_pattern(sub, T._MARK))
    split_parents = cores.parents[todo][pieces.parents]
    split = T._nonempty(Pieces(pieces.values, split_parents, np.bincount(split_parents, minlength=cores.n_rows)))
    return T._grouped([cores.where(~todo), split], cores.n_rows)


def chars(*categories: str) -> str:
    """``text._chars`` asking ``unicodedata`` once per code point per call."""
    import sys
    import unicodedata

    return "".join(c for c in map(chr, range(sys.maxunicode + 1)) if unicodedata.category(c) in categories)


def span_chars(w, start: np.ndarray, n: int) -> np.ndarray:
    cum = np.concatenate([[0], np.cumsum(w.lengths)])
    return cum[start + n] - cum[start]


def top_chars(w, g) -> np.ndarray:
    """``ngrams.top_chars`` sorting every n-gram group, repeated or not."""
    n = g.n
    out = np.zeros(len(w.counts), dtype=np.int64)
    has = w.counts >= n
    row_start = (np.cumsum(w.counts) - w.counts)[has]
    out[has] = span_chars(w, row_start, n) + (n - 1)
    repeat = g.size > 1
    if not repeat.any():
        return out
    group_row = g.row[g.first]
    group_pos = g.start[g.first]
    order = np.lexsort((group_pos, -g.size, group_row))
    order = order[repeat[order]]
    best = order[np.concatenate([[True], group_row[order][1:] != group_row[order][:-1]])]
    length = span_chars(w, group_pos[best], n) + (n - 1)
    out[group_row[best]] = length * g.size[best]
    return out


# --- dedup: normalisation, content hashes, shingles and MinHash signatures ------------------------


def normalize_array(texts: pa.Array, normalize) -> pa.Array:
    """``common.normalize_array`` with NFKC of every non-ASCII text and every whitespace run rewritten."""
    if "nfkc" in normalize:
        texts = nfkc_non_ascii(texts)
    if "lower" in normalize:
        texts = pc.utf8_lower(texts)
    if "punctuation" in normalize:
        texts = pc.replace_substring_regex(texts, r"[\p{P}\p{S}]", " ")
    if "digits" in normalize:
        texts = pc.replace_substring_regex(texts, r"\d", "0")
    if "whitespace" in normalize:
        texts = pc.utf8_trim_whitespace(pc.replace_substring_regex(texts, r"[\s\p{Z}]+", " "))
    return texts


def nfkc_non_ascii(texts: pa.Array) -> pa.Array:
    """``common._nfkc``: ``pc.utf8_normalize`` of every whole non-ASCII string."""
    other = pc.invert(pc.string_is_ascii(texts))
    if not pc.any(other).as_py():
        return texts
    return pc.replace_with_mask(texts, other, pc.utf8_normalize(texts.filter(other), form="NFKC"))


def tokens(texts: pa.Array, *, kind: str, normalize) -> tuple[np.ndarray, np.ndarray]:
    """``shingles.tokens`` after the reference normalisation."""
    from tokenmill.curate.dedup.common import hash_strings

    if kind == "word":  # the split below collapses whitespace itself
        normalize = [n for n in normalize if n != "whitespace"]
    texts = normalize_array(texts, normalize)
    if kind == "char":
        arrays = [np.frombuffer(t.encode("utf-32-le"), dtype=np.uint32) for t in texts.to_pylist()]
        counts = np.array([len(a) for a in arrays], dtype=np.int64)
        values = np.concatenate(arrays).astype(np.uint64) if arrays else np.zeros(0, np.uint64)
        return values, counts
    words = pc.utf8_split_whitespace(texts)
    flat = pc.list_flatten(words)
    parents = pc.list_parent_indices(words).to_numpy()
    nonempty = pc.greater(pc.binary_length(flat), 0).to_numpy(zero_copy_only=False)
    words = pc.dictionary_encode(flat.filter(pa.array(nonempty)))  # hash each distinct word once
    values = hash_strings(words.dictionary)[words.indices.to_numpy()]
    counts = np.bincount(parents[nonempty], minlength=len(texts)).astype(np.int64)
    return values, counts


def shingle_hashes(values: np.ndarray, counts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``shingles.shingle_hashes`` gathering every token of every shingle under a mask, ``n`` times."""
    from tokenmill.curate.dedup.common import mix64
    from tokenmill.curate.dedup.shingles import _C

    per_doc = np.where(counts >= n, counts - n + 1, np.minimum(counts, 1))
    doc_start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    total = int(per_doc.sum())
    first = np.concatenate([[0], np.cumsum(per_doc)[:-1]]).astype(np.int64)
    starts = np.repeat(doc_start, per_doc) + (np.arange(total, dtype=np.int64) - np.repeat(first, per_doc))
    width = np.repeat(np.minimum(counts, n), per_doc)
    acc = np.zeros(total, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            live = width > k
            acc[live] += values[starts[live] + k] * _C[k % len(_C)]
    return mix64(acc), per_doc


def signatures(shingles: np.ndarray, per_doc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``shingles.signatures`` shifting every hash before the minimum, in blocks of 4096 shingles."""
    chunk = 4096
    n_docs, p = len(per_doc), len(a)
    sig = np.full((n_docs, p), np.uint64(0xFFFFFFFF), dtype=np.uint64)
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), per_doc)
    aa, bb = a[:, None], b[:, None]
    shift = np.uint64(32)
    buf = np.empty((p, chunk), dtype=np.uint64)
    for lo in range(0, len(shingles), chunk):
        x = shingles[lo:lo + chunk]
        docs = doc_of[lo:lo + chunk]
        h = buf[:, :len(x)]
        seg = np.flatnonzero(np.concatenate([[True], docs[1:] != docs[:-1]]))
        with np.errstate(over="ignore"):
            np.multiply(aa, x[None, :], out=h)
            h += bb
        h >>= shift
        part = np.minimum.reduceat(h, seg, axis=1).T
        ids = docs[seg]
        sig[ids] = np.minimum(sig[ids], part)
    return sig.astype(np.uint32)


def shingle_sets(texts: pa.Array, *, kind: str, n: int, normalize) -> list[np.ndarray]:
    """``shingles.shingle_sets`` with one ``np.unique`` per document."""
    values, counts = tokens(texts, kind=kind, normalize=normalize)
    sh, per_doc = shingle_hashes(values, counts, n)
    bounds = np.concatenate([[0], np.cumsum(per_doc)])
    return [np.unique(sh[bounds[i]:bounds[i + 1]]) for i in range(len(per_doc))]


def content_hashes(texts, normalize) -> tuple[np.ndarray, np.ndarray]:
    """``exact.content_hashes`` after the reference normalisation."""
    import hashlib

    norm = normalize_array(texts, normalize).to_pylist()
    raw = b"".join(hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in norm)
    both = np.frombuffer(raw, dtype=">u8").astype(np.uint64).reshape(-1, 2)
    return both[:, 0].copy(), both[:, 1].copy()
