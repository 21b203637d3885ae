"""The pairs of a ``tokenmill pref`` output, as the collators of :mod:`tokenmill.loader.pairs` take them.

A pair is three consecutive documents of the one shard format (``tokenmill.pref.run``): its prompt, its chosen
and its rejected completion, linked by their record ids ``<id>/prompt``, ``<id>/chosen``, ``<id>/rejected``.
:class:`PreferenceDataset` indexes them once (the ``.docs`` id columns, no token read) and yields, for pair
``i``, exactly the dict of the pair contract::

    {"pair_id": i, "prompt_ids": int32[...], "chosen_ids": int32[...], "rejected_ids": int32[...],
     "chosen_mask": uint8[...], "rejected_mask": uint8[...]}

``prompt_ids`` is TRL's (the prompt with the generation prompt, cut where the sides diverge), the completions
are what follows it on each side, and the masks are the SFT track's rule (1 = trained); prompt tokens are never
trained. ``pair_id`` is the pair's position in the dataset (stable for one output). A KTO output (its
completions stored as ``desirable``/``undesirable``) yields ``completion_ids``, ``completion_mask`` and
``label`` (True: desirable) instead of the two sides.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from tokenmill.errors import ShardError
from tokenmill.shards.reader import open_shards

PAIR_ROLES = ("prompt", "chosen", "rejected")


class PreferenceDataset(Sequence):
    """The pairs (or KTO records) of a ``tokenmill pref`` output directory, indexable; pickles by directory."""

    def __init__(self, directory: str | os.PathLike, *, tokenizer=None):
        self.shards = open_shards(directory, tokenizer=tokenizer)
        track = (self.shards.manifest or {}).get("track")
        if track != "pref":
            raise ShardError(f"{directory}: a `tokenmill {track}` output, not preference pairs; write them with "
                             "`tokenmill pref` (or read these shards with open_shards)")
        self.records, self.starts, self.kinds = _index(self.shards)

    def __reduce__(self):
        return (PreferenceDataset, (str(self.shards.directory),))

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i) -> dict:
        if not isinstance(i, (int, np.integer)):
            raise TypeError(f"PreferenceDataset indices must be integers, not {type(i).__name__}")
        n = len(self)
        i = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= i < n:
            raise IndexError(f"pair {i} out of range for {n} pairs in {self.shards.directory}")
        k = int(self.starts[i])
        if self.kinds[i] == "pair":
            return {"pair_id": i, "prompt_ids": self._ids(k), "chosen_ids": self._ids(k + 1),
                    "rejected_ids": self._ids(k + 2), "chosen_mask": self._mask(k + 1),
                    "rejected_mask": self._mask(k + 2)}
        return {"pair_id": i, "prompt_ids": self._ids(k), "completion_ids": self._ids(k + 1),
                "completion_mask": self._mask(k + 1), "label": self.kinds[i] == "desirable"}

    def record_id(self, i: int) -> str:
        """The input record's id of pair ``i`` (its ``source:line`` when the record had none)."""
        return self.records[i]

    def _ids(self, doc: int) -> np.ndarray:
        return np.asarray(self.shards.doc_tokens(doc), dtype=np.int32)

    def _mask(self, doc: int) -> np.ndarray:
        return np.asarray(self.shards.doc_mask(doc), dtype=np.uint8)


def _index(shards) -> tuple[list[str], np.ndarray, list[str]]:
    """(record id, first document, kind) of every pair, read from the shards' id columns; a document out of the
    prompt/chosen/rejected order (a damaged or foreign directory) raises :class:`ShardError`."""
    ids = [_split(doc_id) for shard in shards.shards for doc_id in shard.docs.column(0).to_pylist()]
    records, starts, kinds = [], [], []
    k = 0
    while k < len(ids):
        kind = _kind_at(ids, k)
        if kind is None:
            raise ShardError(f"{shards.directory}: document {k} ({'/'.join(ids[k])!r}) does not start a pair "
                             "(<id>/prompt followed by <id>/chosen and <id>/rejected): not a `tokenmill pref` output, "
                             "or damaged")
        records.append(ids[k][0])
        starts.append(k)
        kinds.append(kind)
        k += 3 if kind == "pair" else 2
    return records, np.asarray(starts, dtype=np.int64), kinds


def _kind_at(ids: list[tuple[str, str]], k: int) -> str | None:
    """``pair``, ``desirable`` or ``undesirable`` for the documents starting at ``k``; None when they start none."""
    rid, role = ids[k]
    if role != "prompt" or k + 1 >= len(ids) or ids[k + 1][0] != rid:
        return None
    if ids[k + 1][1] == "chosen":
        return "pair" if k + 2 < len(ids) and ids[k + 2] == (rid, "rejected") else None
    return ids[k + 1][1] if ids[k + 1][1] in ("desirable", "undesirable") else None


def _split(doc_id: str) -> tuple[str, str]:
    rid, _, role = doc_id.rpartition("/")
    return rid, role
