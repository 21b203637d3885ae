"""Pretraining packers that keep document order: concatenate-and-chunk, and boundary-aware packing.

``concat_chunk`` cuts the concatenated token stream (documents already end with EOS) into windows of
``seq_len`` tokens; a window may span documents. Nothing is stored per sample: window ``k`` starts at
token ``k * seq_len`` and :func:`window_pieces` finds its documents with two binary searches over the
cumulative lengths (O(log docs) per sample, 8 bytes per document).

``boundary_aware`` never cuts a document that fits: documents fill a pack in order while they fit;
the next one starts a new pack and the room left is padding (next-fit). A document longer than
``seq_len`` is cut into ``seq_len`` pieces, each a full pack, and its tail starts the next pack.
Cost: O(docs) numpy to cut pieces, then one ``bisect`` per pack (0.13 s for 1e6 documents, 190k packs).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from tokenmill.pack.plan import PackPlan, as_lengths, index_dtype


def concat_chunk(lengths: np.ndarray, seq_len: int, *, drop_last: bool = True) -> np.ndarray:
    """Global token offset of each ``seq_len`` window over the concatenated stream.

    With ``drop_last`` the final partial window is left out; otherwise it is kept (shorter).
    """
    lengths = as_lengths(lengths, seq_len)
    total = int(lengths.sum())
    n = total // seq_len if drop_last else -(-total // seq_len)
    return np.arange(n, dtype=np.int64) * seq_len


def window_pieces(doc_offsets: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(documents, start inside each, lengths) covering stream tokens ``[start, stop)``.

    ``doc_offsets`` is the cumulative length array with a leading 0 (``n_docs + 1`` entries).
    Empty documents inside the window are skipped.
    """
    first = int(np.searchsorted(doc_offsets, start, side="right")) - 1
    last = int(np.searchsorted(doc_offsets, stop, side="left"))
    docs = np.arange(first, last, dtype=np.int64)
    lo = np.maximum(doc_offsets[first:last], start)
    hi = np.minimum(doc_offsets[first + 1:last + 1], stop)
    keep = hi > lo
    return docs[keep], (lo - doc_offsets[first:last])[keep], (hi - lo)[keep]


def boundary_aware(lengths: np.ndarray, seq_len: int) -> PackPlan:
    """Pack whole documents in order (next-fit), cutting only documents longer than ``seq_len``."""
    lengths = as_lengths(lengths, seq_len)
    docs, starts, lens = _pieces(lengths, seq_len)
    cum = np.concatenate([[0], np.cumsum(lens)]).tolist()
    bounds = [0]
    while bounds[-1] < len(lens):
        i = bounds[-1]
        bounds.append(bisect_right(cum, cum[i] + seq_len, lo=i + 1) - 1)
    starts = starts if lens.size and int(starts.max()) > 0 else None  # None: no document was cut
    return PackPlan(pack_offsets=np.asarray(bounds, np.int64), order=docs, seq_lens=lens, starts=starts,
                    seq_len=int(seq_len), dropped=0, empty=int(np.count_nonzero(lengths == 0)))


def _pieces(lengths: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut every document into ``ceil(len / seq_len)`` pieces of at most ``seq_len`` tokens."""
    n_pieces = -(-lengths // seq_len)
    docs = np.repeat(np.arange(lengths.size, dtype=index_dtype(lengths.size)), n_pieces)
    first = np.concatenate([[0], np.cumsum(n_pieces)[:-1]]) if lengths.size else np.zeros(0, np.int64)
    rank = np.arange(docs.size, dtype=np.int64) - np.repeat(first, n_pieces)
    starts = rank * seq_len
    lens = np.minimum(lengths[docs] - starts, seq_len).astype(lengths.dtype)
    return docs, starts, lens
