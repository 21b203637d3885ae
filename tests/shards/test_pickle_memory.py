"""ShardSet pickles by directory; ShardWriter inputs pickle; opening large shards costs little RSS."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import psutil
import pytest

from tokenmill.errors import ShardError
from tokenmill.shards import ShardWriter, open_shards


def test_shard_set_pickles_by_directory(tmp_path, corpus):
    corpus.write(tmp_path, with_mask=True, max_tokens=300)
    ds = open_shards(tmp_path, tokenizer="fp-toy-1")
    ds[3], ds.lengths  # open memmaps first: they must not travel
    blob = pickle.dumps(ds)
    assert len(blob) < 1000 and str(tmp_path).encode() in blob
    again = pickle.loads(blob)
    assert len(again) == len(ds) and again.fingerprint == ds.fingerprint
    for i in (0, 17, len(ds) - 1):
        np.testing.assert_array_equal(again.doc_tokens(i), ds.doc_tokens(i))
        np.testing.assert_array_equal(again.doc_mask(i), ds.doc_mask(i))
    shard = pickle.loads(pickle.dumps(ds.shards[1]))
    np.testing.assert_array_equal(shard.ids, ds.shards[1].ids)


def test_writer_and_its_inputs_pickle_before_writing(tmp_path, info):
    args = pickle.loads(pickle.dumps({"directory": tmp_path, "stem_prefix": "p", "tokenizer_info": info}))
    writer = pickle.loads(pickle.dumps(ShardWriter(**args, max_tokens=64, with_mask=True)))
    writer.add(np.array([4, 5, 0]), rec_id="r", source="s", mask=np.array([0, 1, 1], bool))
    with pytest.raises(ShardError, match="before its first add"):
        pickle.dumps(writer)
    assert writer.close() == ["p-0000"]
    assert open_shards(tmp_path)[0]["loss_mask"].tolist() == [False, True, True]


def test_opening_200mb_of_shards_costs_little_rss(tmp_path, info):
    n_docs, doc_len, n_parts = 500_000, 200, 10  # 100 M uint16 tokens = 200 MB
    rng = np.random.default_rng(0)
    with ShardWriter(tmp_path, stem_prefix="big", tokenizer_info=info, max_tokens=10_000_000) as w:
        per = n_docs // n_parts
        for part in range(n_parts):
            flat = rng.integers(0, 1000, size=per * doc_len, dtype=np.uint16)
            offsets = np.arange(per + 1, dtype=np.int64) * doc_len
            rec_ids = [f"doc-{part}-{i}" for i in range(per)]
            w.add_many(flat, offsets, rec_ids=rec_ids, sources=["web.jsonl"] * per)
            del flat, rec_ids
    gc.collect()
    open_shards(tmp_path)[0]  # warm up lazy imports before measuring
    gc.collect()
    proc = psutil.Process()
    before = proc.memory_info()
    ds = open_shards(tmp_path)
    lengths = ds.lengths
    records = [ds[int(i)]["id"] for i in rng.integers(0, len(ds), size=200)]
    opened = proc.memory_info().rss - before.rss
    assert ds.n_tokens == n_docs * doc_len and len(lengths) == n_docs and len(set(records)) > 150
    assert opened < 30 << 20, f"opening 200 MB of shards grew RSS by {opened / 2**20:.1f} MiB"
    # Reading documents maps page-cache pages (shared, reclaimable file RSS); private memory stays flat.
    total = sum(int(ds.doc_tokens(int(i))[-1]) for i in rng.integers(0, len(ds), size=500))
    after = proc.memory_info()
    private = (after.rss - after.shared) - (before.rss - before.shared)
    assert total >= 0 and private < 30 << 20, f"reading documents grew private RSS by {private / 2**20:.1f} MiB"
