"""Word n-grams of every document of a batch at once, as 64-bit keys.

An n-gram is the tuple of ids of ``n`` consecutive words of one document (:class:`.text.Words`; equal ids
are equal strings). Its key is a polynomial hash of the ids mixed with the document's row, so equal keys
mean the same n-gram in the same document (a collision needs two different n-grams of one batch to agree
on 64 bits). Grouping equal keys is a sort: O(W log W) for the W words of the batch at n = 1, then only
over the positions whose shorter n-gram repeats. Before each sort, one count of the keys in about 2.5
buckets per key (:func:`_may_repeat`) drops the keys alone in their bucket, which surely occur once: of
the 815,000 2-grams of 1,281 real pages, 405,000 are left to sort (the sort was two thirds of the time).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tokenmill.curate.filters.heuristics.text import Words

_P = np.uint64(0x100000001B3)
SCAN_SLICE = 1 << 12  # candidate positions converted to Python ints at once by the greedy scan
_ROW = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)  # spreads a key's bits into its top ones (the bucket of :func:`_may_repeat`)
MAX_BUCKET_BITS = 22  # at most 4 M buckets (32 MB of counts), whatever the number of keys
MIN_PREFILTER = 4096  # fewer keys are sorted as they come


@dataclass
class Grams:
    """The n-grams of a batch that may repeat (every other n-gram occurs once in its document)."""

    n: int
    start: np.ndarray  # position of the n-gram's first word in the batch's word sequence
    row: np.ndarray  # its document
    group: np.ndarray  # equal n-grams of one document share a group
    first: np.ndarray  # per group: the index (into start) of its first occurrence
    size: np.ndarray  # per group: occurrences


def repeated_grams(w: Words, sizes: list[int]) -> dict[int, Grams]:
    """``{n: Grams}`` for each n in ``sizes`` (all held at once: :func:`iter_grams` holds one at a time)."""
    return dict(iter_grams(w, sizes))


def iter_grams(w: Words, sizes: list[int]) -> Iterator[tuple[int, Grams]]:
    """``(n, Grams)`` for each n in ``sizes``, in increasing n, computed from the positions whose (n-1)-gram
    repeats (an n-gram can repeat only where its first n-1 words do): the first sort is over every word of the
    batch, later ones over the few positions that still repeat.

    One ``Grams`` is alive at a time when the caller drops each before asking for the next: a ``Grams`` holds
    five integers per candidate position, and a long repetitive document keeps most positions candidates for
    every n (a 10 MB page held 0.6 GB of them for the nine sizes of Gopher's rules)."""
    total = len(w.ids)
    # words from each position to the end of its document: an n-gram starts at a position with room >= n
    room = np.repeat(np.cumsum(w.counts), w.counts) - np.arange(total)
    ids = w.ids.astype(np.uint64) + np.uint64(1)
    cand = np.arange(total)
    h = ids.copy()
    for n in range(1, max(sizes, default=0) + 1):
        if n == 1 and 1 not in sizes:
            continue  # every position stays a candidate for n = 2
        ok = room[cand] >= n
        cand, h = cand[ok], h[ok]
        if n > 1:
            with np.errstate(over="ignore"):
                h = h * _P + ids[cand + n - 1]
        row = w.parents[cand]
        with np.errstate(over="ignore"):
            key = h ^ (row.astype(np.uint64) * _ROW)
        may = _may_repeat(key)
        if may is not None:  # the keys that surely occur once leave before the sort
            del row, key  # made again for those left: a copy beside each would raise the peak
            cand, h = cand[may], h[may]
            row = w.parents[cand]
            with np.errstate(over="ignore"):
                key = h ^ (row.astype(np.uint64) * _ROW)
            del may
        grams = _group(n, cand, row, key)
        keep = grams.size[grams.group] > 1
        del row, key
        if n in sizes:
            yield n, grams
        del grams
        cand, h = cand[keep], h[keep]


def _may_repeat(key: np.ndarray) -> np.ndarray | None:
    """Indices of the keys that may occur more than once: those sharing a bucket (the key's top bits after a
    multiply) with another key; ``None`` (all of them) for a few keys, or when at most a tenth would leave (a
    long repetitive document: the copies would cost more than they save). Exact: a key alone in its bucket is
    unique. Costs one ``bincount`` over about 2.5 buckets per key (at most ``2**MAX_BUCKET_BITS``)."""
    if len(key) < MIN_PREFILTER:
        return None
    bits = min(MAX_BUCKET_BITS, (len(key) * 5 // 2).bit_length())
    with np.errstate(over="ignore"):
        bucket = ((key * _MIX) >> np.uint64(64 - bits)).astype(np.intp)
    shared = np.bincount(bucket, minlength=1 << bits)[bucket] > 1
    del bucket
    if np.count_nonzero(shared) * 10 > len(key) * 9:
        return None
    return np.flatnonzero(shared)


def _group(n: int, start: np.ndarray, row: np.ndarray, key: np.ndarray) -> Grams:
    """Group equal keys: a stable sort (faster here than numpy's default quicksort:
    24 -> 17 ms for 405,000 keys), so each group's first index in sorted order is its first occurrence."""
    if len(key) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Grams(n, start, row, empty, empty, empty)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    head = np.empty(len(key), dtype=bool)
    head[0] = True
    np.not_equal(sorted_key[1:], sorted_key[:-1], out=head[1:])
    del sorted_key
    bounds = np.flatnonzero(head)
    group = np.empty(len(key), dtype=np.int64)
    group[order] = np.cumsum(head) - 1
    return Grams(n, start, row, group, order[bounds], np.diff(bounds, append=len(key)))


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
    groups = np.flatnonzero(g.size > 1)  # only the repeated n-grams compete (positions break every tie)
    if len(groups) == 0:
        return out
    group_row = g.row[g.first[groups]]
    group_pos = g.start[g.first[groups]]
    size = g.size[groups]
    most = np.zeros(len(w.counts), dtype=np.int64)  # per row: the highest count (0: no repeated n-gram)
    np.maximum.at(most, group_row, size)
    top = size == most[group_row]
    first = np.full(len(w.counts), np.iinfo(np.int64).max, dtype=np.int64)  # the earliest of those
    np.minimum.at(first, group_row[top], group_pos[top])
    rows = np.flatnonzero(most)
    out[rows] = (_span_chars(w, first[rows], n) + (n - 1)) * most[rows]
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
    inside = bytearray(len(w.ids))  # 1 at the positions of the n-grams counted so far
    span = b"\x01" * n
    seen: set[int] = set()
    counted: list[int] = []  # indices into cand
    allowed = -1
    for at in range(0, len(cand), SCAN_SLICE):  # Python ints for one slice at a time: memory bounded by the slice
        part = cand[at: at + SCAN_SLICE]
        groups = g.group[part]
        for i, q, grp, f in zip(itertools.count(at), g.start[part].tolist(), groups.tolist(),
                                first_pos[groups].tolist()):
            if q < allowed:
                continue
            if grp in seen or not inside[f]:  # f inside a counted n-gram was skipped, never seen
                counted.append(i)
                allowed = q + n
                inside[q: allowed] = span
            else:
                seen.add(grp)
    if counted:
        at = cand[np.array(counted, dtype=np.int64)]
        np.add.at(out, g.row[at], _span_chars(w, g.start[at], n))
    return out
