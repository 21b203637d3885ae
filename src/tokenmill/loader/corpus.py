"""Several shard directories of one tokenizer seen as one list of documents."""

from __future__ import annotations

import hashlib
import os

import numpy as np

from tokenmill.errors import ShardError
from tokenmill.shards import ShardSet, open_shards
from tokenmill.tokenize.identity import describe, fingerprint_of, recorded


def open_sets(sources, *, tokenizer=None, allow_partial: bool = False) -> list:
    """Normalise a path, a ShardSet, or a list of them into a list of ShardSets (an unfinished run's
    directory is refused unless ``allow_partial``)."""
    if isinstance(sources, (str, os.PathLike, ShardSet)):
        sources = [sources]
    expected = None if tokenizer is None else fingerprint_of(tokenizer)  # loaded once for every set
    sets = [s if isinstance(s, ShardSet) else open_shards(s, tokenizer=expected, allow_partial=allow_partial)
            for s in sources]
    if not sets:
        raise ShardError("no shard directories given; pass a directory, a ShardSet, or a list of them")
    named = [(s.fingerprint, f"{s.directory} (tokenizer {recorded(s.header['tokenizer_info'] or {})})")
             for s in sets]
    if tokenizer is not None:  # sets given already open are checked here too
        named.insert(0, (expected, f"the tokenizer given ({describe(tokenizer)})"))
    check_same_tokenizer(named)
    return sets


def check_same_tokenizer(named: list[tuple[str, str]]) -> None:
    """Raise ShardError when the (fingerprint, where) pairs disagree on the tokenizer."""
    first_fp, first_where = named[0]
    for fp, where in named[1:]:
        if fp != first_fp:
            raise ShardError(
                f"{where} was tokenized with fingerprint {fp[:12]}, but {first_where} with {first_fp[:12]}; "
                "data read together must share one tokenizer: re-tokenize one of them"
            )


class Corpus:
    """Documents of several ShardSets, indexed globally (set after set); masks default to all-trained.

    ``has_weights``: some set carries per-token loss weights; then every piece gets weights (its mask as
    0.0/1.0 where a document has none).
    """

    def __init__(self, sets: list):
        self.sets = sets
        self.doc_base = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
        self.lengths = _global_lengths(sets)
        self.has_mask = any(s.has_mask for s in sets)
        self.has_weights = any(s.has_weights for s in sets)
        self.tokenizer_fingerprint = sets[0].fingerprint
        self.fingerprint = _data_fingerprint(self.tokenizer_fingerprint, self.lengths)

    def piece(self, doc: int, start: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Token ids (int64), loss mask (bool) and loss weights (float32, or None without weights) of tokens
        ``[start, start + n)`` of document ``doc``."""
        k = int(np.searchsorted(self.doc_base, doc, side="right")) - 1
        shard_set, local = self.sets[k], int(doc - self.doc_base[k])
        ids = shard_set.doc_tokens(local)[start:start + n].astype(np.int64)
        mask = shard_set.doc_mask(local)
        mask = np.ones(n, np.bool_) if mask is None else np.array(mask[start:start + n], np.bool_)
        if not self.has_weights:
            return ids, mask, None
        weights = shard_set.doc_weights(local) if shard_set.has_weights else None
        weights = mask.astype(np.float32) if weights is None else np.array(weights[start:start + n], np.float32)
        return ids, mask, weights

    def read(self, docs, starts, lens) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Concatenated ids, mask and weights (None without weights) of the pieces ``(docs[j], starts[j], lens[j])``."""
        parts = [self.piece(int(d), int(s), int(n)) for d, s, n in zip(docs, starts, lens)]
        if not parts:
            empty = np.zeros(0, np.float32) if self.has_weights else None
            return np.zeros(0, np.int64), np.zeros(0, np.bool_), empty
        weights = np.concatenate([w for _, _, w in parts if w is not None]) if self.has_weights else None
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), weights


def _global_lengths(sets: list) -> np.ndarray:
    """Lengths of all documents, set after set, held once: a single set's own array, else one filled copy."""
    if len(sets) == 1:
        return sets[0].lengths
    dtype = np.result_type(*[s.lengths_dtype for s in sets])
    out = np.empty(sum(len(s) for s in sets), dtype)
    pos = 0
    for s in sets:
        s.read_lengths(out=out[pos:pos + len(s)])
        pos += len(s)
    return out


def _data_fingerprint(tokenizer_fp: str, lengths: np.ndarray, *, chunk: int = 1 << 16) -> str:
    """Tokenizer fingerprint + a digest of every length as int64: changes when the data changes.

    Hashed in chunks, so an int32 array costs no int64 copy and gives the digest of its int64 values.
    """
    digest = hashlib.blake2b(digest_size=8)
    for lo in range(0, lengths.size, chunk):
        digest.update(np.ascontiguousarray(lengths[lo:lo + chunk], dtype="<i8").tobytes())
    return f"{tokenizer_fp}:{lengths.size}:{digest.hexdigest()}"


class DocView:
    """A :class:`Corpus` seen through a document map: virtual document ``i`` is document ``doc_map[i]``.

    Made by :func:`select_docs`: a token cap keeps a prefix of the documents, length-aware upsampling
    appends extra copies of the long ones (after the originals, so a shuffled order spreads them).
    Same interface as ``Corpus`` (``lengths``, ``read``, fingerprints); one int64 per virtual document.
    """

    def __init__(self, corpus: Corpus, doc_map: np.ndarray, tag: str, n_unique: int):
        self.base, self.doc_map, self.n_unique = corpus, doc_map, n_unique  # documents 0..n_unique-1 are used
        self.sets, self.has_mask, self.has_weights = corpus.sets, corpus.has_mask, corpus.has_weights
        self.lengths = corpus.lengths[doc_map]
        self.tokenizer_fingerprint = corpus.tokenizer_fingerprint
        self.fingerprint = f"{corpus.fingerprint}|{tag}"

    def read(self, docs, starts, lens):
        return self.base.read(self.doc_map[np.asarray(docs, np.int64)], starts, lens)


def select_docs(corpus: Corpus, *, cap_tokens: int | None = None, upsample_long: tuple[int, int] | None = None):
    """``corpus`` itself, or a :class:`DocView` keeping the documents within the first ``cap_tokens`` tokens
    and repeating those of ``min_tokens`` or more ``factor`` times (``upsample_long=(min_tokens, factor)``)."""
    if cap_tokens is None and (upsample_long is None or upsample_long[1] <= 1):
        return corpus
    lengths = corpus.lengths.astype(np.int64)
    keep = lengths.size if cap_tokens is None else max(1, int(np.searchsorted(np.cumsum(lengths), cap_tokens, "right")))
    doc_map = np.arange(keep, dtype=np.int64)
    tags = [] if cap_tokens is None else [f"cap={cap_tokens}"]
    if upsample_long is not None and upsample_long[1] > 1:
        min_tokens, factor = upsample_long
        long = doc_map[lengths[:keep] >= min_tokens]
        doc_map = np.concatenate([doc_map, np.tile(long, factor - 1)])
        tags.append(f"long>={min_tokens}x{factor}")
    return DocView(corpus, doc_map, ",".join(tags), keep)
