"""``PackPlan``: which example pieces fill which fixed-length pack, as flat CSR arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmill.errors import ConfigError


@dataclass(frozen=True)
class PackPlan:
    """Packs of at most ``seq_len`` tokens, stored as compressed sparse rows.

    The pieces of pack ``k`` are ``j in range(pack_offsets[k], pack_offsets[k + 1])``: example
    ``order[j]``, tokens ``[starts[j], starts[j] + seq_lens[j])`` of that example. ``starts`` is None
    when no example is split (every piece starts at 0). Memory: ``order`` int32 below 2**31 examples,
    ``seq_lens`` in the dtype of the lengths given (int32 from shards), ``starts`` only when needed.
    """

    pack_offsets: np.ndarray
    order: np.ndarray
    seq_lens: np.ndarray
    starts: np.ndarray | None
    seq_len: int
    dropped: int = 0
    empty: int = 0

    @property
    def n_packs(self) -> int:
        return int(self.pack_offsets.size - 1)

    @property
    def n_tokens(self) -> int:
        return int(self.seq_lens.sum())

    @property
    def efficiency(self) -> float:
        """Share of non-pad tokens when every pack is padded to ``seq_len`` (1.0 for an empty plan)."""
        slots = self.n_packs * self.seq_len
        return self.n_tokens / slots if slots else 1.0

    def pack(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(example indices, start offsets, lengths) of the pieces of pack ``k``."""
        a, b = int(self.pack_offsets[k]), int(self.pack_offsets[k + 1])
        starts = np.zeros(b - a, np.int64) if self.starts is None else self.starts[a:b]
        return self.order[a:b], starts, self.seq_lens[a:b]

    def pack_lengths(self) -> np.ndarray:
        """Non-pad tokens of every pack."""
        csum = np.concatenate([[0], np.cumsum(self.seq_lens)])
        return np.diff(csum[self.pack_offsets])


def as_lengths(lengths, seq_len: int) -> np.ndarray:
    """Validate the shared inputs of the packers; int32 and int64 arrays pass as they are, others become int64."""
    problems = []
    if int(seq_len) < 1:
        problems.append(f"seq_len must be >= 1, got {seq_len}")
    arr = np.asarray(lengths)
    if arr.ndim != 1:
        problems.append(f"lengths must be a 1-D array, got shape {arr.shape}")
    elif arr.size and not np.issubdtype(arr.dtype, np.integer):
        problems.append(f"lengths must hold integers, got dtype {arr.dtype}")
    elif arr.size and int(arr.min()) < 0:
        problems.append(f"lengths must be >= 0, found {int(arr.min())} at index {int(arr.argmin())}")
    if problems:
        raise ConfigError(problems)
    return arr if arr.dtype in (np.int32, np.int64) else arr.astype(np.int64)


def index_dtype(n: int) -> np.dtype:
    """int32 for indices below 2**31, else int64."""
    return np.dtype(np.int32 if n < 1 << 31 else np.int64)


def plan_from_bins(lengths: np.ndarray, examples: np.ndarray, bins: np.ndarray, n_bins: int, *,
                   seq_len: int, dropped: int, empty: int) -> PackPlan:
    """Build a :class:`PackPlan` from a bin id per example (order inside a bin kept as given)."""
    order = examples[np.argsort(bins, kind="stable")]
    offsets = np.zeros(n_bins + 1, np.int64)
    np.cumsum(np.bincount(bins, minlength=n_bins), out=offsets[1:])
    return PackPlan(pack_offsets=offsets, order=order, seq_lens=lengths[order], starts=None,
                    seq_len=int(seq_len), dropped=dropped, empty=empty)
