"""Word n-grams of every document of a batch at once, as 64-bit keys.

An n-gram is the tuple of ids of ``n`` consecutive words of one document (:class:`.text.Words`; equal ids
are equal strings). Its key is a polynomial hash of the ids mixed with the document's row, so equal keys
mean the same n-gram in the same document (a collision needs two different n-grams of one batch to agree
on 64 bits). Grouping equal keys is a sort: O(W log W) for the W words of the batch at n = 1, then only
over the positions whose shorter n-gram repeats.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from tokenmill.curate.filters.heuristics.text import Words

_P = np.uint64(0x100000001B3)
_ROW = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class Grams:
    """The n-grams of a batch that may repeat (every other n-gram occurs once in its document)."""

    n: int
    start: np.ndarray  # position of the n-gram's first word in the batch's word sequence
    row: np.ndarray  # its document
    group: np.ndarray  # equal n-grams of one document share a group
    first: np.ndarray  # per group: the index (into start) of its first occurrence
    size: np.ndarray  # per group: occurrences


def repeated_grams(w: Words, sizes: list[int]):
    """``{n: Grams}`` for each n in ``sizes``, computed for increasing n from the positions whose (n-1)-gram
    repeats (an n-gram can repeat only where its first n-1 words do): the first sort is over every word of the
    batch, later ones over the few positions that still repeat."""
    out: dict[int, Grams] = {}
    total = len(w.ids)
    row_start = np.cumsum(w.counts) - w.counts
    ids = w.ids.astype(np.uint64) + np.uint64(1)
    cand = np.arange(total)
    h = ids.copy()
    for n in range(1, max(sizes, default=0) + 1):
        if n == 1 and 1 not in sizes:
            continue  # every position stays a candidate for n = 2
        if n > 1:
            valid = cand + n - 1 < total
            cand, h = cand[valid], h[valid]
            with np.errstate(over="ignore"):
                h = h * _P + ids[cand + n - 1]
        row = w.parents[cand]
        ok = (cand - row_start[row]) + n <= w.counts[row]
        cand, h, row = cand[ok], h[ok], row[ok]
        with np.errstate(over="ignore"):
            key = h ^ (row.astype(np.uint64) * _ROW)
        grams = _group(n, cand, row, key)
        if n in sizes:
            out[n] = grams
        keep = grams.size[grams.group] > 1
        cand, h = cand[keep], h[keep]
    return out


def _group(n: int, start: np.ndarray, row: np.ndarray, key: np.ndarray) -> Grams:
    """Group equal keys: an unstable sort, then the first occurrence of each group as its smallest index."""
    if len(key) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Grams(n, start, row, empty, empty, empty)
    order = np.argsort(key)
    sorted_key = key[order]
    head = np.concatenate([[True], sorted_key[1:] != sorted_key[:-1]])
    bounds = np.flatnonzero(head)
    group = np.empty(len(key), dtype=np.int64)
    group[order] = np.cumsum(head) - 1
    first = np.minimum.reduceat(order, bounds)
    size = np.diff(np.concatenate([bounds, [len(key)]]))
    return Grams(n, start, row, group, first, size)


def _span_chars(w: Words, start: np.ndarray, n: int) -> np.ndarray:
    """Characters of the words ``start .. start+n-1`` (no separators)."""
    cum = w.cum_chars()
    return cum[start + n] - cum[start]


def top_chars(w: Words, g: Grams) -> np.ndarray:
    """Per document: characters of its most frequent n-gram, words joined by one space, times its count.
    Ties go to the n-gram that occurs first; with no repeat, that is the document's first n-gram, once.
    0 for a document with fewer than ``n`` words."""
    n = g.n
    out = np.zeros(len(w.counts), dtype=np.int64)
    has = w.counts >= n
    row_start = (np.cumsum(w.counts) - w.counts)[has]
    out[has] = _span_chars(w, row_start, n) + (n - 1)
    repeat = g.size > 1
    if not repeat.any():
        return out
    groups = np.flatnonzero(repeat)  # only the repeated n-grams compete (positions break every tie)
    group_row = g.row[g.first[groups]]
    group_pos = g.start[g.first[groups]]
    size = g.size[groups]
    order = np.lexsort((group_pos, -size, group_row))
    best = order[np.concatenate([[True], group_row[order][1:] != group_row[order][:-1]])]
    length = _span_chars(w, group_pos[best], n) + (n - 1)
    out[group_row[best]] = length * size[best]
    return out


def duplicate_chars(w: Words, g: Grams) -> np.ndarray:
    """Per document: characters (words joined without separator) of the n-grams that repeat an earlier one,
    scanning left to right and jumping past each counted n-gram, as Gopher's reference implementation does.

    An n-gram is counted when an earlier, visited occurrence exists; positions inside a counted n-gram are
    not visited. This scan is the one per-position Python loop of the heuristic steps: it visits only the
    positions whose n-gram occurred before in the document (none in most documents), every other position
    being settled by the vectorised grouping; its cost is inside ``gopher_repetition``'s time in
    BENCHMARKS.md.
    """
    n = g.n
    out = np.zeros(len(w.counts), dtype=np.int64)
    if len(g.start) == 0:
        return out
    repeat = np.ones(len(g.start), dtype=bool)
    repeat[g.first] = False
    cand = np.flatnonzero(repeat)
    if len(cand) == 0:
        return out
    first_pos = g.start[g.first]
    chars = _span_chars(w, g.start[cand], n)
    chosen: list[int] = []
    seen: set[int] = set()
    allowed = -1
    for q, grp, c, row in zip(g.start[cand].tolist(), g.group[cand].tolist(), chars.tolist(), g.row[cand].tolist()):
        if q < allowed:
            continue
        if grp in seen or not _skipped(chosen, int(first_pos[grp]), n):
            out[row] += c
            chosen.append(q)
            allowed = q + n
        else:
            seen.add(grp)
    return out


def _skipped(chosen: list[int], pos: int, n: int) -> bool:
    """Whether ``pos`` lies strictly inside a counted n-gram (which starts before it)."""
    i = bisect.bisect_left(chosen, pos) - 1
    return i >= 0 and chosen[i] < pos < chosen[i] + n
