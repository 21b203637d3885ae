"""Which documents ``tokenmill audit`` shows: by source, by id, or by the shape of their loss mask.

A user auditing a mix wants the GSM8K examples (``--source '*gsm8k*'``), the one id a trainer logged
(``--id alpaca-00412``), or the examples a mask check flagged (``--shape untrained``: no trained token,
``unstopped``: a trained span that does not end in a stop token, ``multi-turn``: two trained spans or more,
``longest`` / ``shortest``). Filters combine (all must hold); of the documents that match, ``n`` are shown,
spread evenly over them (the ``n`` longest or shortest for those shapes).

Sources and ids are read from each shard's document table (Arrow), masks in chunks of the memory map: the
pick costs one pass over the masks at most, never a decode.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import ConfigError
from tokenmill.shards.reader import ShardSet

MASK_SHAPES = ("untrained", "unstopped", "multi-turn")
SHAPES = (*MASK_SHAPES, "longest", "shortest")
_SCAN_TOKENS = 1 << 24  # tokens of mask read at a time


@dataclass(frozen=True)
class Pick:
    """What to show: documents whose source matches one of ``sources`` (glob patterns, or a name), whose id
    is one of ``ids``, and of ``shape``; an empty field does not filter."""

    sources: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()
    shape: str | None = None

    def __post_init__(self) -> None:
        if self.shape is not None and self.shape not in SHAPES:
            raise ConfigError(f"--shape {self.shape!r}: expected one of {', '.join(SHAPES)}")

    def __bool__(self) -> bool:
        return bool(self.sources or self.ids or self.shape)

    def describe(self) -> str:
        parts = [f"source {' or '.join(self.sources)}"] if self.sources else []
        parts += [f"id {' or '.join(self.ids)}"] if self.ids else []
        parts += [f"shape {self.shape}"] if self.shape else []
        return ", ".join(parts)


def choose(shards: ShardSet, pick: Pick, n: int, stop_ids: np.ndarray | None) -> tuple[list[int], int]:
    """(the indices of the documents to show, how many documents match ``pick``)."""
    found = matching(shards, pick, stop_ids)
    if pick.shape in ("longest", "shortest"):
        lengths = np.asarray(shards.lengths, dtype=np.int64)[found]
        order = np.argsort(-lengths if pick.shape == "longest" else lengths, kind="stable")
        return sorted(found[order[:max(n, 0)]].tolist()), len(found)
    if n <= 0 or len(found) == 0:
        return [], len(found)
    spread = np.unique(np.linspace(0, len(found) - 1, min(n, len(found))).round().astype(np.int64))
    return found[spread].tolist(), len(found)


def matching(shards: ShardSet, pick: Pick, stop_ids: np.ndarray | None) -> np.ndarray:
    """Indices, in order, of the documents every filter of ``pick`` holds for."""
    keep = np.ones(shards.n_docs, dtype=bool)
    if pick.sources or pick.ids:
        keep &= _table_flags(shards, pick)
    if pick.shape in MASK_SHAPES:
        keep &= _shape_flags(shards, pick.shape, stop_ids)
    return np.flatnonzero(keep)


def sources_of(shards: ShardSet, limit: int = 8) -> list[str]:
    """Up to ``limit`` distinct sources of the set, for an error that names what there is."""
    seen: dict[str, None] = {}
    for shard in shards.shards:
        for value in pc.unique(shard.docs.column(1)).to_pylist():
            seen.setdefault(str(value), None)
            if len(seen) >= limit:
                return list(seen)
    return list(seen)


def _table_flags(shards: ShardSet, pick: Pick) -> np.ndarray:
    parts = []
    for shard in shards.shards:
        docs = shard.docs
        flags = np.ones(shard.n_docs, dtype=bool)
        if pick.ids:
            flags &= _is_in(docs.column(0), list(pick.ids))
        if pick.sources:
            names = [s for s in pc.unique(docs.column(1)).to_pylist() if s is not None and _source_matches(s, pick.sources)]
            flags &= _is_in(docs.column(1), names)
        parts.append(flags)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _is_in(column: pa.Array, values: Sequence[str]) -> np.ndarray:
    if not values:
        return np.zeros(len(column), dtype=bool)
    found = pc.is_in(column.cast(pa.string()), value_set=pa.array(values, type=pa.string()))
    return found.fill_null(False).to_numpy(zero_copy_only=False)


def _source_matches(source: str, patterns: Sequence[str]) -> bool:
    """A pattern matches the whole source, its file name, or, as a glob, the source."""
    name = source.rsplit("/", 1)[-1]
    return any(p in (source, name) or fnmatch.fnmatchcase(source, p) for p in patterns)


def _shape_flags(shards: ShardSet, shape: str, stop_ids: np.ndarray | None) -> np.ndarray:
    if not shards.has_mask:
        raise ConfigError(f"--shape {shape}: these shards have no loss mask (every token is trained); the mask "
                          "shapes apply to SFT shards")
    if shape == "unstopped" and stop_ids is None:
        raise ConfigError("--shape unstopped needs the tokenizer to know the stop tokens: pass --tokenizer")
    flags = np.zeros(shards.n_docs, dtype=bool)
    for base, mask, ids, starts, ends in _chunks(shards, with_ids=shape == "unstopped"):
        runs = _run_starts(mask, starts, ends)
        if shape == "untrained":
            flags[base + np.flatnonzero((runs == 0) & (ends > starts))] = True
        elif shape == "multi-turn":
            flags[base + np.flatnonzero(runs >= 2)] = True
        elif ids is not None and stop_ids is not None:  # unstopped: read with its ids, stop ids checked above
            flags[base + _unstopped(mask, ids, ends, stop_ids)] = True
    return flags


def _chunks(shards: ShardSet, *, with_ids: bool) -> Iterator[tuple[int, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]]:
    """(first document, mask, ids or None, document starts, ends) over about ``_SCAN_TOKENS`` tokens at a time."""
    base = 0
    for shard in shards.shards:
        offsets = np.asarray(shard.offsets, dtype=np.int64)
        d0, n = 0, len(offsets) - 1
        while d0 < n:
            d1 = min(max(int(np.searchsorted(offsets, offsets[d0] + _SCAN_TOKENS, side="right")) - 1, d0 + 1), n)
            lo, hi = int(offsets[d0]), int(offsets[d1])
            mask = shard.mask_slice(lo, hi)
            ids = np.asarray(shard.ids[lo:hi]) if with_ids else None
            yield base + d0, mask, ids, offsets[d0:d1] - lo, offsets[d0 + 1:d1 + 1] - lo
            d0 = d1
        base += shard.n_docs


def _run_starts(mask: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Trained runs per document (a run never continues into the next document)."""
    begins = mask & ~np.concatenate(([False], mask[:-1]))
    filled = ends > starts
    begins[starts[filled]] = mask[starts[filled]]
    runs = np.zeros(len(starts), dtype=np.int64)
    if filled.any():
        runs[filled] = np.add.reduceat(begins.view(np.uint8), starts[filled], dtype=np.int64)
    return runs


def _unstopped(mask: np.ndarray, ids: np.ndarray, ends: np.ndarray, stop_ids: np.ndarray) -> np.ndarray:
    """Local indices of documents with a trained run whose last token is not a stop id."""
    last = mask & ~np.concatenate((mask[1:], [False]))
    inner = ends[(ends > 0) & (ends < len(mask))] - 1
    last[inner] = mask[inner]  # a run ends where its document ends
    bad = np.flatnonzero(last & ~np.isin(ids, stop_ids))
    return np.unique(np.searchsorted(ends, bad, side="right"))
