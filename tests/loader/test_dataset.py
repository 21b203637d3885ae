"""PackedDataset against the documents written: every token served, in the planned place."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from loaderkit import pretrain_docs, sft_docs

from tokenmill.errors import RoutingError, ShardError
from tokenmill.loader import PackedDataset
from tokenmill.shards import open_shards


def doc_key(ids):
    return tuple(int(x) for x in ids)


def served_pieces(ds):
    """Every sample split back into its pieces, as (ids, mask) tuples."""
    out = []
    for k in range(len(ds)):
        s = ds[k]
        assert s["input_ids"].size == s["loss_mask"].size == int(s["seq_lens"].sum()) <= ds.seq_len
        cuts = np.cumsum(s["seq_lens"])[:-1]
        out += list(zip(np.split(s["input_ids"], cuts), np.split(s["loss_mask"], cuts)))
    return out


def test_bfd_serves_every_example_once_with_its_mask(write_shards):
    docs = sft_docs(np.random.default_rng(0), 120) + [(np.arange(2, 90), np.ones(88, bool))]  # one too long
    ds = PackedDataset(write_shards(docs), seq_len=64, mode="bfd", seed=5)
    served = Counter((doc_key(i), doc_key(m)) for i, m in served_pieces(ds))
    expected = Counter((doc_key(i), doc_key(m)) for i, m in docs[:-1])
    assert served == expected
    assert ds.plan.dropped == 1
    assert ds.plan.efficiency > 0.9


def test_epochs_replan_and_same_seed_repeats(write_shards):
    directory = write_shards(sft_docs(np.random.default_rng(1), 200))
    a = PackedDataset(directory, seq_len=64, seed=3)
    b = PackedDataset(directory, seq_len=64, seed=3)
    first = [doc_key(a[k]["input_ids"]) for k in range(len(a))]
    assert first == [doc_key(b[k]["input_ids"]) for k in range(len(b))]
    a.set_epoch(1)
    second = [doc_key(a[k]["input_ids"]) for k in range(len(a))]
    assert second != first
    assert Counter(x for s in first for x in s) == Counter(x for s in second for x in s)
    b.set_epoch(1)
    assert second == [doc_key(b[k]["input_ids"]) for k in range(len(b))]


def test_concat_windows_equal_the_stream(write_shards):
    docs = pretrain_docs(np.random.default_rng(2), 80)
    ds = PackedDataset(write_shards(docs, max_tokens=300), seq_len=32, mode="concat", shuffle=False)
    stream = np.concatenate([d for d, _ in docs])
    assert len(ds) == stream.size // 32
    for k in range(len(ds)):
        s = ds[k]
        np.testing.assert_array_equal(s["input_ids"], stream[k * 32:(k + 1) * 32])
        assert s["loss_mask"].all()
    shuffled = PackedDataset(ds.corpus.sets, seq_len=32, mode="concat", seed=1)
    assert sorted(doc_key(shuffled[k]["input_ids"]) for k in range(len(ds))) == sorted(
        doc_key(ds[k]["input_ids"]) for k in range(len(ds)))


def test_boundary_mode_keeps_short_documents_whole(write_shards):
    docs = pretrain_docs(np.random.default_rng(3), 60, max_len=70)
    ds = PackedDataset(write_shards(docs), seq_len=32, mode="boundary")
    pieces = [doc_key(i) for i, _ in served_pieces(ds)]
    for ids, _ in docs:
        if ids.size <= 32:
            assert doc_key(ids) in pieces
    assert sum(len(p) for p in pieces) == sum(d.size for d, _ in docs)


def test_several_directories_read_as_one(write_shards):
    rng = np.random.default_rng(4)
    a, b = sft_docs(rng, 30), sft_docs(rng, 40)
    ds = PackedDataset([write_shards(a, name="a"), write_shards(b, name="b")], seq_len=64)
    assert Counter(doc_key(i) for i, _ in served_pieces(ds)) == Counter(doc_key(i) for i, _ in a + b)


def test_refuses_block_packing_of_sft_data(write_shards):
    directory = write_shards(sft_docs(np.random.default_rng(5), 10))
    with pytest.raises(RoutingError, match="mode='bfd'"):
        PackedDataset(directory, seq_len=64, mode="concat")


def test_refuses_mixed_or_mismatched_tokenizers(write_shards):
    rng = np.random.default_rng(6)
    a = write_shards(sft_docs(rng, 5), name="a", fingerprint="fp-a")
    b = write_shards(sft_docs(rng, 5), name="b", fingerprint="fp-b")
    with pytest.raises(ShardError, match="share one tokenizer"):
        PackedDataset([a, b], seq_len=64)
    with pytest.raises(ShardError, match="fp-b"):
        PackedDataset(open_shards(a), seq_len=64, tokenizer="fp-b")
