"""Small corpora and writers for the shard tests."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill.shards import ShardWriter

INFO = {"name": "toy-bpe", "fingerprint": "fp-toy-1", "vocab_size": 1000, "bos_id": 1, "eos_id": 0, "pad_id": 2}


class Corpus:
    """Random documents ending in EOS, with masks, ids and sources, as flat arrays and per document."""

    def __init__(self, *, n_docs: int, vocab: int, seed: int = 0, max_len: int = 40):
        rng = np.random.default_rng(seed)
        lengths = rng.integers(1, max_len, size=n_docs)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.flat = rng.integers(3, vocab, size=int(self.offsets[-1])).astype(np.int64)
        self.flat[self.offsets[1:] - 1] = 0  # EOS ends every document
        self.mask = rng.random(len(self.flat)) < 0.6
        self.rec_ids = [f"rec-{i}" for i in range(n_docs)]
        self.sources = [f"part-{i % 3}.jsonl" for i in range(n_docs)]

    def doc(self, i: int) -> np.ndarray:
        return self.flat[self.offsets[i] : self.offsets[i + 1]]

    def doc_mask(self, i: int) -> np.ndarray:
        return self.mask[self.offsets[i] : self.offsets[i + 1]]

    def write(self, directory, *, info=INFO, with_mask=False, max_tokens=1 << 28, prefix="part") -> list[str]:
        with ShardWriter(directory, stem_prefix=prefix, tokenizer_info=info, max_tokens=max_tokens,
                         with_mask=with_mask) as writer:  # fmt: skip
            writer.add_many(self.flat, self.offsets, rec_ids=self.rec_ids, sources=self.sources,
                            flat_mask=self.mask if with_mask else None)  # fmt: skip
        return writer.close()


@pytest.fixture
def info() -> dict:
    return dict(INFO)


@pytest.fixture
def make_corpus():
    """Factory: ``make_corpus(n_docs=..., vocab=..., seed=...)``."""
    return Corpus


@pytest.fixture
def corpus() -> Corpus:
    return Corpus(n_docs=60, vocab=INFO["vocab_size"])
