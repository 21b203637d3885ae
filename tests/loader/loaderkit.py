"""Small random documents for the loader tests (imported by name: keep this module name unique)."""

from __future__ import annotations

import numpy as np

VOCAB = 96
EOS, PAD = 1, 0


def sft_docs(rng, n, *, min_len=6, max_len=40):
    """Random ids; an untrained prompt then a trained response (mask True) ending in EOS."""
    docs = []
    for _ in range(n):
        length = int(rng.integers(min_len, max_len + 1))
        ids = rng.integers(2, VOCAB, size=length)
        ids[-1] = EOS
        mask = np.zeros(length, np.bool_)
        mask[int(rng.integers(1, length - 1)):] = True
        docs.append((ids, mask))
    return docs


def pretrain_docs(rng, n, *, min_len=1, max_len=50):
    docs = []
    for _ in range(n):
        ids = rng.integers(2, VOCAB, size=int(rng.integers(min_len, max_len + 1)))
        ids[-1] = EOS
        docs.append((ids, None))
    return docs
