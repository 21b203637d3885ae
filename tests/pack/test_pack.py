"""Packers against naive one-at-a-time oracles."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tokenmill.errors import ConfigError
from tokenmill.pack import best_fit_decreasing, boundary_aware, concat_chunk, packing_stats, window_pieces


def naive_bfd(lengths, seq_len):
    """Textbook BFD: longest first, each into the open bin with the least room that fits."""
    rooms = []
    for n in sorted((x for x in lengths if 0 < x <= seq_len), reverse=True):
        fits = [r for r in rooms if r >= n]
        if fits:
            best = rooms.index(min(fits))
            rooms[best] -= n
        else:
            rooms.append(seq_len - n)
    return sorted(seq_len - r for r in rooms)


def naive_first_fit(lengths, seq_len):
    rooms = []
    for n in (x for x in lengths if 0 < x <= seq_len):
        for i, r in enumerate(rooms):
            if r >= n:
                rooms[i] -= n
                break
        else:
            rooms.append(seq_len - n)
    return len(rooms)


def sft_lengths(rng, n, seq_len):
    """Realistic SFT lengths: log-normal, long tail cut by the caller's seq_len."""
    return np.clip(rng.lognormal(np.log(seq_len / 8), 0.9, n), 1, seq_len * 1.5).astype(np.int64)


def check_plan(plan, lengths, seq_len):
    kept = np.flatnonzero((lengths > 0) & (lengths <= seq_len))
    assert sorted(plan.order.tolist()) == kept.tolist()  # every fitting example exactly once
    assert (plan.pack_lengths() <= seq_len).all()
    assert (plan.pack_lengths() > 0).all()
    np.testing.assert_array_equal(plan.seq_lens, lengths[plan.order])


@pytest.mark.parametrize("seq_len", [16, 64, 100])
@pytest.mark.parametrize("trial", range(6))
def test_bfd_equals_textbook_bfd(seq_len, trial):
    rng = np.random.default_rng(trial)
    lengths = rng.integers(0, seq_len + 10, size=int(rng.integers(1, 300)))
    plan = best_fit_decreasing(lengths, seq_len, seed=trial)
    check_plan(plan, lengths, seq_len)
    assert sorted(plan.pack_lengths().tolist()) == naive_bfd(lengths.tolist(), seq_len)
    assert plan.dropped == int((lengths > seq_len).sum())
    assert plan.empty == int((lengths == 0).sum())


@pytest.mark.parametrize("trial", range(5))
def test_bfd_never_worse_than_first_fit(trial):
    rng = np.random.default_rng(100 + trial)
    lengths = sft_lengths(rng, 400, 256)
    plan = best_fit_decreasing(lengths, 256)
    assert plan.n_packs <= naive_first_fit(lengths.tolist(), 256)


def test_bfd_is_deterministic_and_seed_only_permutes_ties():
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 200, size=5000)
    a, b = best_fit_decreasing(lengths, 512, seed=3), best_fit_decreasing(lengths, 512, seed=3)
    np.testing.assert_array_equal(a.order, b.order)
    np.testing.assert_array_equal(a.pack_offsets, b.pack_offsets)
    c = best_fit_decreasing(lengths, 512, seed=4)
    assert not np.array_equal(a.order, c.order)
    assert c.n_packs == a.n_packs and c.efficiency == a.efficiency
    np.testing.assert_array_equal(a.seq_lens, c.seq_lens)  # same shapes, other examples


@pytest.mark.parametrize("seq_len", [2048, 4096])
def test_bfd_efficiency_on_realistic_lengths(seq_len):
    lengths = sft_lengths(np.random.default_rng(seq_len), 50_000, seq_len)
    plan = best_fit_decreasing(lengths, seq_len)
    check_plan(plan, lengths, seq_len)
    assert plan.efficiency >= 0.99
    assert plan.dropped == int((lengths > seq_len).sum()) > 0


def test_bfd_million_examples_in_seconds():
    lengths = sft_lengths(np.random.default_rng(1), 1_000_000, 4096)
    t0 = time.perf_counter()
    plan = best_fit_decreasing(lengths, 4096, seed=0)
    assert time.perf_counter() - t0 < 5.0
    assert plan.efficiency >= 0.99
    assert plan.order.size + plan.dropped + plan.empty == lengths.size


def test_bad_input_is_a_config_error():
    with pytest.raises(ConfigError, match="seq_len"):
        best_fit_decreasing(np.array([1, 2]), 0)
    with pytest.raises(ConfigError, match="index 1"):
        best_fit_decreasing(np.array([1, -2]), 8)
    with pytest.raises(ConfigError, match="integers"):
        best_fit_decreasing(np.array([1.5]), 8)


def test_concat_chunk_and_window_pieces_cover_the_stream():
    lengths = np.array([5, 0, 3, 12, 1, 7])
    starts = concat_chunk(lengths, 4)
    assert starts.tolist() == [0, 4, 8, 12, 16, 20, 24]
    assert concat_chunk(lengths, 4, drop_last=False).tolist() == [0, 4, 8, 12, 16, 20, 24]
    assert concat_chunk(lengths, 5, drop_last=False).tolist() == [0, 5, 10, 15, 20, 25]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    stream = np.concatenate([np.full(n, d) for d, n in enumerate(lengths)])
    for s in concat_chunk(lengths, 5, drop_last=False).tolist():
        docs, inside, lens = window_pieces(offsets, s, min(s + 5, offsets[-1]))
        rebuilt = np.concatenate([np.full(n, d) for d, n in zip(docs, lens)])
        np.testing.assert_array_equal(rebuilt, stream[s:s + 5])
        assert (inside + lens <= lengths[docs]).all()


def test_boundary_aware_keeps_documents_whole():
    lengths = np.array([3, 4, 2, 11, 5, 0, 8, 1])
    plan = boundary_aware(lengths, 8)
    packs = [list(zip(*(a.tolist() for a in plan.pack(k)))) for k in range(plan.n_packs)]
    assert packs == [
        [(0, 0, 3), (1, 0, 4)],          # 2 would overflow: next pack
        [(2, 0, 2)],                      # 11 does not fit the room left
        [(3, 0, 8)],                      # the long document's full piece
        [(3, 8, 3), (4, 0, 5)],           # its tail shares a pack
        [(6, 0, 8)],
        [(7, 0, 1)],
    ]
    assert plan.empty == 1
    assert (plan.pack_lengths() <= 8).all()


def test_packing_stats_reports_padding_savings():
    lengths = np.array([10, 20, 30, 40, 50, 60, 70, 200])
    stats = packing_stats(lengths, 100, batch_size=4)
    assert stats["dropped_over_length"] == 1
    assert stats["packed_samples"] == 3  # 70+30, 60+40, 50+20+10
    assert stats["packing_efficiency"] == pytest.approx(280 / 300)
    assert stats["pad_share_fixed"] == pytest.approx(1 - 280 / 700)
    assert stats["pad_share_batch_max"] == pytest.approx(1 - 280 / (40 * 4 + 70 * 3))


def test_bfd_with_every_example_over_length_gives_no_pack():
    plan = best_fit_decreasing(np.array([10, 20], np.int64), 5)
    assert (plan.n_packs, plan.dropped, plan.n_tokens) == (0, 2, 0)
