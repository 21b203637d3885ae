"""Samples and plans equal golden digests of the int64 implementation; opening shards stays small in RSS.

The digests were computed with the earlier loader, which kept every array as int64: the compact dtypes,
the omitted ``starts`` and the chunked ``.idx`` reads must not change a single plan entry or sample.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest

from tokenmill.loader import PackedDataset
from tokenmill.pack import best_fit_decreasing, boundary_aware
from tokenmill.shards import ShardWriter

PLAN_DIGESTS = {("bfd", 0): "2ad2356b7fb0e4eb", ("bfd", 1): "fd03cf7349b38c76", ("bfd", 7): "e3d22c6a9258770b",
                ("bfd", 2**40 + 3): "92276da8b96c57d3", ("boundary", None): "85b09e3c500de161"}
SAMPLE_DIGESTS = {("bfd", 0, 0): "1f957dc4d4587190", ("bfd", 0, 1): "4b85b053cdfbbdaf",
                  ("bfd", 3, 0): "5fdbec1a8ef80cba", ("bfd", 3, 1): "8f53b7e54515b66d",
                  ("concat", True): "e33145cb0e0a871d", ("concat", False): "067ac6e50500199c",
                  ("boundary", True): "0bc77c24cb55586d", ("boundary", False): "876aafd052d87df9"}


def digest(arrays) -> str:
    d = hashlib.blake2b(digest_size=8)
    for a in arrays:
        d.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
        d.update(b"|")
    return d.hexdigest()


def plan_digest(plan) -> str:
    starts = np.zeros(plan.order.size) if plan.starts is None else plan.starts
    return digest([plan.pack_offsets, plan.order, plan.seq_lens, starts])


def sample_digest(ds) -> str:
    return digest(ds[k][key] for k in range(len(ds)) for key in ("input_ids", "loss_mask", "seq_lens"))


def write_golden(directory, rng, n, with_mask):
    info = {"name": "t", "fingerprint": "fp-golden", "vocab_size": 500, "eos_id": 1, "pad_id": 0}
    with ShardWriter(directory, stem_prefix=directory.name, tokenizer_info=info, max_tokens=3000,
                     with_mask=with_mask) as writer:
        for i in range(n):
            length = int(rng.integers(1, 200)) if i % 13 else 0
            ids = rng.integers(2, 500, size=length)
            mask = (rng.random(length) < 0.5) if with_mask else None
            if length or not with_mask:
                writer.add(ids, rec_id=f"{i}", source="g", mask=mask)
    return directory


def test_plans_equal_golden_digests():
    rng = np.random.default_rng(1234)
    lengths = np.clip(rng.lognormal(5.0, 1.0, 5000).astype(np.int64), 0, 3000)
    lengths[::97] = 0
    for as_int32 in (False, True):
        given = lengths.astype(np.int32) if as_int32 else lengths
        for seed in (0, 1, 7, 2**40 + 3):
            plan = best_fit_decreasing(given, 1024, seed=seed)
            assert plan_digest(plan) == PLAN_DIGESTS["bfd", seed] and plan.starts is None
            assert (plan.dropped, plan.empty, plan.order.dtype) == (124, 52, np.int32)
        plan = boundary_aware(given, 512)
        assert plan_digest(plan) == PLAN_DIGESTS["boundary", None] and plan.starts is not None
    assert boundary_aware(np.minimum(lengths, 512), 512).starts is None  # nothing cut, nothing stored


def test_samples_equal_golden_digests(tmp_path):
    rng = np.random.default_rng(99)
    sft = write_golden(tmp_path / "sft", rng, 400, True)
    pre = write_golden(tmp_path / "pre", rng, 400, False)
    for seed in (0, 3):
        for epoch in (0, 1):
            ds = PackedDataset(sft, seq_len=256, mode="bfd", seed=seed, epoch=epoch)
            assert ds.fingerprint == "fp-golden:369:8dec354b5526f1ac"
            assert sample_digest(ds) == SAMPLE_DIGESTS["bfd", seed, epoch]
    for mode in ("concat", "boundary"):
        for shuffle in (True, False):
            ds = PackedDataset(pre, seq_len=128, mode=mode, seed=5, shuffle=shuffle)
            assert ds.fingerprint == "fp-golden:400:66816950914e69d9"
            assert sample_digest(ds) == SAMPLE_DIGESTS[mode, shuffle]


def test_lengths_are_int32_and_read_without_keeping_idx_pages(tmp_path):
    rng = np.random.default_rng(0)
    directory = write_golden(tmp_path / "sft", rng, 300, True)
    ds = PackedDataset([directory, directory], seq_len=256, mode="bfd")
    single = ds.corpus.sets[0].read_lengths()
    assert ds.corpus.lengths.dtype == np.int32 and single.dtype == np.int32
    np.testing.assert_array_equal(ds.corpus.lengths, np.concatenate([single, single]))
    assert all("idx" not in shard._maps for s in ds.corpus.sets for shard in s.shards)


CHILD = """
import json, sys
import psutil
import pyarrow, pyarrow.parquet
from tokenmill.loader import PackedDataset
proc = psutil.Process()
base = proc.memory_info().rss
ds = PackedDataset(sys.argv[1], seq_len=4096, mode="bfd", seed=0)
opened = proc.memory_info().rss
ds[0]
print(json.dumps({"open_mb": (opened - base) / 2**20, "docs": int(ds.corpus.lengths.size), "packs": len(ds)}))
"""


def test_opening_200mb_of_shards_stays_under_30mb(tmp_path):
    """500,000 examples, 40 M tokens (uint32 ids + mask, 200 MB): the int64 loader grew RSS by ~47 MB."""
    pytest.importorskip("psutil")
    n_docs, per = 500_000, 80
    rng = np.random.default_rng(0)
    lengths = rng.integers(per // 2, per * 3 // 2 + 1, n_docs)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    info = {"name": "synthetic", "fingerprint": "fp-mem", "vocab_size": 100_000, "pad_id": 0}
    with ShardWriter(tmp_path / "big", stem_prefix="big", tokenizer_info=info, with_mask=True,
                     max_tokens=1 << 24) as writer:
        writer.add_many(np.full(int(offsets[-1]), 70_000, np.uint32), offsets, rec_ids=[""] * n_docs,
                        sources=["s"] * n_docs, flat_mask=np.ones(int(offsets[-1]), np.bool_))
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "big")], capture_output=True, text=True,
                         check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["docs"] == n_docs and result["packs"] > 0
    assert result["open_mb"] < 30, result
