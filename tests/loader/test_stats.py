"""shard_stats over written shards, checked against the documents written."""

from __future__ import annotations

import numpy as np
from loaderkit import pretrain_docs, sft_docs

from tokenmill.loader import render_stats, shard_stats


def test_sft_stats(write_shards):
    docs = sft_docs(np.random.default_rng(0), 50)
    stats = shard_stats(write_shards(docs), seq_len=64)
    tokens = sum(d.size for d, _ in docs)
    assert stats["documents"] == 50 and stats["tokens"] == tokens and stats["track"] == "sft"
    assert stats["supervised_share"] == sum(int(m.sum()) for _, m in docs) / tokens
    packing = stats["packing"]
    assert packing["packing_efficiency"] > 0.9 > 1 - packing["pad_share_fixed"]
    text = render_stats(stats)
    assert "packing at seq_len 64" in text and f"{tokens:,}" in text


def test_pretrain_stats(write_shards):
    docs = pretrain_docs(np.random.default_rng(1), 30)
    stats = shard_stats(write_shards(docs), seq_len=16)
    assert stats["supervised_share"] == 1.0 and stats["track"] == "pretrain"
    assert stats["packing"]["concat_samples"] == sum(d.size for d, _ in docs) // 16
    assert "boundary_efficiency" in render_stats(stats)
