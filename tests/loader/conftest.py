"""Shard-writing fixture for the loader tests: small SFT-like or pretraining shards in tmp dirs."""

from __future__ import annotations

import pytest
from loaderkit import EOS, PAD, VOCAB, pretrain_docs, sft_docs  # noqa: F401

from tokenmill.shards import ShardWriter


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
