"""Several shard directories of one tokenizer seen as one list of documents."""

from __future__ import annotations

import hashlib
import os

import numpy as np

from tokenmill.errors import ShardError


def open_sets(sources, *, tokenizer=None) -> list:
    """Normalise a path, a ShardSet, or a list of them into a list of ShardSets."""
    from tokenmill.shards import ShardSet, open_shards

    if isinstance(sources, (str, os.PathLike, ShardSet)):
        sources = [sources]
    sets = [s if isinstance(s, ShardSet) else open_shards(s, tokenizer=tokenizer) for s in sources]
    if not sets:
        raise ShardError("no shard directories given; pass a directory, a ShardSet, or a list of them")
    named = [(s.fingerprint, str(s.directory)) for s in sets]
    if tokenizer is not None:  # sets given already open are checked here too
        expected = tokenizer if isinstance(tokenizer, str) else getattr(tokenizer, "fingerprint", None)
        named.insert(0, (expected, f"the tokenizer given ({type(tokenizer).__name__})"))
    check_same_tokenizer(named)
    return sets


def check_same_tokenizer(named: list[tuple[str, str]]) -> None:
    """Raise ShardError when the (fingerprint, where) pairs disagree on the tokenizer."""
    first_fp, first_where = named[0]
    for fp, where in named[1:]:
        if fp != first_fp:
            raise ShardError(
                f"{where} was tokenized with fingerprint {fp}, but {first_where} with {first_fp}; "
                "data read together must share one tokenizer: re-tokenize one of them"
            )


class Corpus:
    """Documents of several ShardSets, indexed globally (set after set); masks default to all-trained."""

    def __init__(self, sets: list):
        self.sets = sets
        self.doc_base = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
        self.lengths = np.concatenate([s.lengths for s in sets]).astype(np.int64, copy=False)
        self.has_mask = any(s.has_mask for s in sets)
        self.tokenizer_fingerprint = sets[0].fingerprint
        self.fingerprint = _data_fingerprint(self.tokenizer_fingerprint, self.lengths)

    def piece(self, doc: int, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (int64) and loss mask (bool) of tokens ``[start, start + n)`` of document ``doc``."""
        k = int(np.searchsorted(self.doc_base, doc, side="right")) - 1
        shard_set, local = self.sets[k], int(doc - self.doc_base[k])
        ids = shard_set.doc_tokens(local)[start:start + n].astype(np.int64)
        mask = shard_set.doc_mask(local)
        mask = np.ones(n, np.bool_) if mask is None else np.array(mask[start:start + n], np.bool_)
        return ids, mask

    def read(self, docs, starts, lens) -> tuple[np.ndarray, np.ndarray]:
        """Concatenated ids and mask of the pieces ``(docs[j], starts[j], lens[j])``."""
        parts = [self.piece(int(d), int(s), int(n)) for d, s, n in zip(docs, starts, lens)]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.bool_)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _data_fingerprint(tokenizer_fp: str, lengths: np.ndarray) -> str:
    """Tokenizer fingerprint + a digest of every document length: changes when the data changes."""
    digest = hashlib.blake2b(np.ascontiguousarray(lengths).tobytes(), digest_size=8).hexdigest()
    return f"{tokenizer_fp}:{lengths.size}:{digest}"
