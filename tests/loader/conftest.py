"""Shard-writing fixture for the loader tests: small SFT-like or pretraining shards in tmp dirs."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill.shards import ShardWriter

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


@pytest.fixture
def write_shards(tmp_path):
    """write_shards(docs, name=..., fingerprint=..., max_tokens=...) -> shard directory."""

    def write(docs, *, name="data", fingerprint="fp-test", max_tokens=500, vocab=VOCAB):
        directory = tmp_path / name
        info = {"name": "test-tok", "fingerprint": fingerprint, "vocab_size": vocab, "eos_id": EOS, "pad_id": PAD}
        with_mask = docs[0][1] is not None
        with ShardWriter(directory, stem_prefix=name, tokenizer_info=info, max_tokens=max_tokens,
                         with_mask=with_mask) as writer:
            for i, (ids, mask) in enumerate(docs):
                writer.add(ids, rec_id=f"{name}:{i}", source=name, mask=mask)
        return directory

    return write
