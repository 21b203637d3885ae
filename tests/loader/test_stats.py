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
    text = render_stats(stats)
    assert "boundary_efficiency" in text and "boundary_samples" in text
    # the loader packs pretraining shards with concat or boundary, never best-fit-decreasing (an SFT mode
    # that drops documents over seq_len): its numbers would describe a packing the shards never get
    for bfd_only in ("dropped_over_length", "packed_samples", "packing_efficiency", "pad_share_fixed"):
        assert bfd_only not in stats["packing"] and bfd_only not in text


def test_tokens_by_document_length_per_source(tmp_path):

    from recipekit import write_web

    from tokenmill.cli import main
    from tokenmill.pretrain import run_pretrain
    from tokenmill.shards import open_shards

    raw = tmp_path / "raw"
    raw.mkdir()
    short, long = write_web(raw / "short.jsonl", 40, hi=60), write_web(raw / "long.jsonl", 6, seed=1, lo=500, hi=3000)
    run_pretrain([str(short), str(long)], out=tmp_path / "out", tokenizer="default", workers=1, progress=False)
    shards = open_shards(tmp_path / "out")
    docs = [shards[i] for i in range(len(shards))]
    stats = shard_stats(tmp_path / "out", seq_len=512)
    table = stats["by_length"]
    assert set(table) == {"all", "short.jsonl", "long.jsonl"}
    for source, rows in table.items():
        mine = [int(n) for d, n in zip(docs, shards.lengths) if source in ("all", d["source"])]
        for row in rows:
            inside = [n for n in mine if n >= row["min_tokens"] and (row["max_tokens"] is None or n < row["max_tokens"])]
            assert (row["documents"], row["tokens"]) == (len(inside), sum(inside))
        assert sum(r["tokens"] for r in rows) == sum(mine)
    assert stats["packing"]["long_doc_share"] == sum(n for n in shards.lengths if n > 512) / shards.n_tokens
    assert "tokens by document length" in render_stats(stats)
    assert main(["stats", str(tmp_path / "out"), "--json"]) == 0
