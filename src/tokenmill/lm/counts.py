"""Exact n-gram counts keyed by word ids, numpy-vectorised: no hashing, so no two n-grams ever share a count.

A work unit's text is read in chunks (``chunk_words`` words): each chunk's n-grams of every order are counted
(rows of word ids sorted lexicographically, equal rows summed); the counts so far are merged with the chunk's
once they hold more than ``chunk_words`` rows per order, so a unit holds its distinct n-grams and one chunk,
never its text. The unit's counts are written sorted (``ORDER.npy`` rows and counts, ids local to the unit
with its ``vocab.arrow``); the merge maps each unit's ids onto the run's vocabulary and sums.

Ids 0, 1, 2 are ``<unk>``, ``<s>``, ``</s>`` in every unit and in the model; a unit's words follow from 3 in
the order it met them; the model's words follow from 3 in byte order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

UNK, BOS, EOS = 0, 1, 2
SPECIALS = ("<unk>", "<s>", "</s>")


class Vocab:
    """A unit's words -> ids, in the order they were met (ids from 3)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {w: i for i, w in enumerate(SPECIALS)}

    def encode(self, words: list[str]) -> list[int]:
        ids = self.ids
        return [ids.setdefault(w, len(ids)) for w in words]

    def words(self) -> list[str]:
        """The unit's own words (not the specials), by id."""
        return list(self.ids)[len(SPECIALS):]


def sentence_ids(vocab: Vocab, sentences: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """One flat id array of ``<s> words </s>`` per sentence, and each position's sentence number."""
    flat: list[int] = []
    lengths = []
    for words in sentences:
        flat.append(BOS)
        flat += vocab.encode(words)
        flat.append(EOS)
        lengths.append(len(words) + 2)
    ids = np.asarray(flat, dtype=np.int64)
    return ids, np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


def ngram_rows(ids: np.ndarray, sent: np.ndarray, n: int) -> np.ndarray:
    """``(m, n)`` rows: every n-gram inside one sentence (``<s>`` only ever first, ``</s>`` only last)."""
    if len(ids) < n:
        return np.zeros((0, n), dtype=np.int64)
    starts = np.nonzero(sent[:len(ids) - n + 1] == sent[n - 1:])[0]
    return np.stack([ids[starts + k] for k in range(n)], axis=1)


def count_rows(rows: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows, sorted lexicographically, and the sum of their weights (1 each when ``weights`` is None).

    One integer sort per column instead of a lexsort over all of them: column by column, a row's key is the
    rank of its prefix among the distinct prefixes times the id range plus its next id, which orders the
    rows as their words do."""
    if not len(rows):
        return rows, np.zeros(0, dtype=np.int64)
    size = int(rows.max()) + 1
    key = rows[:, 0].astype(np.int64)
    for j in range(1, rows.shape[1]):
        _, rank = np.unique(key, return_inverse=True)
        key = rank.astype(np.int64) * size + rows[:, j]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    w = None if weights is None else weights.astype(np.float64)
    counts = np.bincount(inverse, weights=w, minlength=len(first))
    return rows[first], np.rint(counts).astype(np.int64)


def chunk_counts(ids: np.ndarray, sent: np.ndarray, order: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The counted n-grams of orders 1..``order`` of one chunk (as :func:`count_rows` of :func:`ngram_rows`),
    one integer sort per order: the n-gram starting at a position is keyed by the rank of the (n-1)-gram
    starting there times the id range plus its last id."""
    size = int(ids.max()) + 1 if len(ids) else 1
    rank = np.zeros(0, dtype=np.int64)  # the rank of the (n-1)-gram starting at each position (-1: none)
    out = []
    for n in range(1, order + 1):
        starts = np.nonzero(sent[:len(ids) - n + 1] == sent[n - 1:])[0] if len(ids) >= n else np.zeros(0, np.int64)
        key = ids[starts] if n == 1 else rank[starts] * size + ids[starts + n - 1]
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        rank = np.full(len(ids), -1, dtype=np.int64)
        rank[starts] = inverse
        at = starts[first]
        rows = np.stack([ids[at + k] for k in range(n)], axis=1) if len(at) else np.zeros((0, n), dtype=np.int64)
        out.append((rows, np.bincount(inverse, minlength=len(first)).astype(np.int64)))
    return out


class UnitCounts:
    """The counts of one unit, every order, merged chunk by chunk (module docstring)."""

    def __init__(self, order: int, chunk_words: int) -> None:
        self.order, self.chunk_words = order, chunk_words
        self.vocab = Vocab()
        self.parts: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(order)]
        self.pending: list[list[str]] = []
        self.pending_words = 0
        self.words = 0
        self.sentences = 0

    def add(self, sentences: list[list[str]]) -> None:
        self.pending += sentences
        self.pending_words += sum(len(s) + 2 for s in sentences)
        if self.pending_words >= self.chunk_words:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        ids, sent = sentence_ids(self.vocab, self.pending)
        self.words += len(ids) - 2 * len(self.pending)
        self.sentences += len(self.pending)
        self.pending, self.pending_words = [], 0
        for n, counted in enumerate(chunk_counts(ids, sent, self.order), start=1):
            parts = self.parts[n - 1]
            parts.append(counted)
            if sum(len(r) for r, _ in parts) > self.chunk_words and len(parts) > 1:
                parts[:] = [_merge(parts)]

    def write(self, where: Path) -> None:
        """``vocab.arrow`` and ``<n>.npy`` (rows) / ``<n>.counts.npy`` per order, sorted."""
        self.flush()
        where.mkdir(parents=True, exist_ok=True)
        write_words(where / "vocab.arrow", self.vocab.words())
        for n in range(1, self.order + 1):
            parts = self.parts[n - 1]
            rows, counts = _merge(parts) if parts else (np.zeros((0, n), dtype=np.int64), np.zeros(0, dtype=np.int64))
            np.save(where / f"{n}.npy", rows.astype(np.int32))
            np.save(where / f"{n}.counts.npy", counts)


def _merge(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if len(parts) == 1:
        return parts[0]
    return count_rows(np.concatenate([r for r, _ in parts]), np.concatenate([c for _, c in parts]))


def write_words(path: Path, words: list[str]) -> None:
    table = pa.table({"word": pa.array(words, type=pa.large_string())})
    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)


def read_words(path: Path) -> pa.Array:
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all().column("word").combine_chunks()


def merged_vocab(unit_dirs: list[Path]) -> tuple[pa.Array, list[np.ndarray]]:
    """The run's words (specials first, then every unit's words in byte order) and, per unit, the map from
    its local ids to the run's."""
    local = [read_words(d / "vocab.arrow") for d in unit_dirs]
    everything = pa.concat_arrays(local) if local else pa.array([], type=pa.large_string())
    words = pc.unique(everything)
    words = words.take(pc.sort_indices(words))
    maps = []
    for arr in local:
        to_run = pc.index_in(arr, value_set=words).to_numpy(zero_copy_only=False).astype(np.int64) + len(SPECIALS)
        maps.append(np.concatenate([np.arange(len(SPECIALS), dtype=np.int64), to_run]))
    return pa.concat_arrays([pa.array(SPECIALS, type=pa.large_string()), words]), maps


def merged_order(unit_dirs: list[Path], maps: list[np.ndarray], n: int,
                 spare: int = 2_000_000) -> tuple[np.ndarray, np.ndarray]:
    """Every unit's order-``n`` counts on the run's ids, summed: ``(rows, counts)`` sorted.

    Units are added to a running sum, compacted whenever the rows waiting exceed the rows summed so far
    (plus ``spare``): the build holds about twice the distinct n-grams of the order, not every unit's."""
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    waiting = 0
    for d, m in zip(unit_dirs, maps):
        parts.append((m[np.load(d / f"{n}.npy")], np.load(d / f"{n}.counts.npy")))
        waiting += len(parts[-1][0])
        if waiting > len(parts[0][0]) + spare and len(parts) > 1:
            parts = [_merge(parts)]
            waiting = 0
    if not parts:
        return np.zeros((0, n), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return count_rows(*parts[0]) if len(parts) == 1 else _merge(parts)
