"""Global order, rank/worker partition and exact resume across changed world sizes."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from loaderkit import PAD, sft_docs

from tokenmill.errors import ConfigError, ShardError
from tokenmill.loader import PackedDataset, partition, permute


@pytest.mark.parametrize("n", [1, 2, 7, 64, 1000, 4097])
def test_permute_is_a_seeded_bijection(n):
    a = permute(np.arange(n), n, seed=1)
    assert sorted(a.tolist()) == list(range(n))
    if n > 6:
        assert a.tolist() != permute(np.arange(n), n, seed=2).tolist()
        assert a.tolist() != list(range(n))


@pytest.mark.parametrize("world_size", [1, 2, 3, 8])
@pytest.mark.parametrize("num_workers", [1, 2, 3])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_partition_covers_every_position_once(world_size, num_workers, batch_size):
    n, start = 103, 9
    served = Counter(p for r in range(world_size) for w in range(num_workers)
                     for p in partition(n, rank=r, world_size=world_size, worker_id=w,
                                        num_workers=num_workers, batch_size=batch_size, start=start))
    assert sorted(served) == list(range(start, n)) and set(served.values()) == {1}


def test_partition_rejects_bad_split():
    with pytest.raises(ConfigError, match="rank=2"):
        list(partition(10, rank=2, world_size=2))


torch = pytest.importorskip("torch")

from tokenmill.loader import PackedCollator, PackedLoader  # noqa: E402


def make_loader(directory, *, rank, world_size, batch_size=3, num_workers=0):
    dataset = PackedDataset(directory, seq_len=48, seed=11)
    collate = PackedCollator(pad_id=PAD, pad_to=48)
    return PackedLoader(dataset, batch_size=batch_size, collate_fn=collate, rank=rank, world_size=world_size,
                        num_workers=num_workers)


def rows(batch):
    return [tuple(r.tolist()) for r in batch["input_ids"]]


def test_ranks_see_every_sample_once_and_resume_on_another_world_size(write_shards):
    directory = write_shards(sft_docs(np.random.default_rng(0), 240))
    reference = make_loader(directory, rank=0, world_size=1, batch_size=1)
    in_order = [r for b in reference for r in rows(b)]  # global positions 0, 1, 2, ...
    # two ranks for 4 steps, then save
    loaders = [make_loader(directory, rank=r, world_size=2) for r in range(2)]
    its = [iter(x) for x in loaders]
    seen = Counter(r for _ in range(4) for it in its for r in rows(next(it)))
    state = loaders[0].state_dict()
    assert state == loaders[1].state_dict() and state["cursor"] == 4 * 3 * 2
    # resume on three ranks: the rest of the epoch, no sample twice
    resumed = [make_loader(directory, rank=r, world_size=3) for r in range(3)]
    for x in resumed:
        x.load_state_dict(state)
    for x in resumed:
        seen.update(r for b in x for r in rows(b))
    n = len(in_order)
    end = 24 + (n - 24) // 9 * 9  # the tail is dropped so the three ranks stay in lockstep
    assert seen == Counter(in_order[:end]) and n - end < 9
    assert all(x.epoch == 1 and x.cursor == 0 for x in resumed)


def test_workers_do_not_change_the_batches(write_shards):
    directory = write_shards(sft_docs(np.random.default_rng(1), 150))
    plain = [rows(b) for b in make_loader(directory, rank=1, world_size=2)]
    workers = [rows(b) for b in make_loader(directory, rank=1, world_size=2, num_workers=2)]
    assert plain == workers and len(plain) > 3


def test_state_refuses_other_data(write_shards):
    rng = np.random.default_rng(2)
    a = make_loader(write_shards(sft_docs(rng, 50), name="a"), rank=0, world_size=1)
    b = make_loader(write_shards(sft_docs(rng, 50), name="b"), rank=0, world_size=1)
    with pytest.raises(ShardError, match="same shards"):
        b.load_state_dict(a.state_dict())
