"""ScheduledBlend: phases by training step, indices that continue across phases, exact resume across a
phase boundary with another world size."""

from __future__ import annotations

import numpy as np
import pytest
from loaderkit import pretrain_docs, sft_docs

from tokenmill.errors import ConfigError
from tokenmill.loader import PackedDataset, ScheduledBlend

PHASES = [{"until_step": 10, "weights": {"pre": 1}}, {"weights": {"pre": 0.7, "sft": 0.3}}]


@pytest.fixture
def components(write_shards):
    rng = np.random.default_rng(0)
    pre = PackedDataset(write_shards(pretrain_docs(rng, 400), name="pre"), seq_len=32, mode="concat")
    sft = PackedDataset(write_shards(sft_docs(rng, 60), name="sft"), seq_len=32)
    return {"pre": pre, "sft": sft}


def test_phases_switch_at_the_step_and_indices_continue(components):
    blend = ScheduledBlend(components, PHASES, num_samples=200, global_batch_size=4)
    seen = {0: [], 1: []}
    for k in range(200):
        c, j = blend.route(k)
        if k < 40:
            assert c == 0  # pretraining only for 10 steps of 4 samples
        seen[c].append(j)
    assert seen[0] == list(range(len(seen[0]))) and seen[1] == list(range(len(seen[1])))  # in order, no restart
    after = len(seen[1]) / 160
    assert abs(after - 0.3) < 0.02
    assert blend.counts(200) == {"pre": len(seen[0]), "sft": len(seen[1])}
    assert blend.counts(40) == {"pre": 40, "sft": 0}


def test_small_source_repeats_for_more_epochs(components):
    blend = ScheduledBlend(components, [{"weights": {"pre": 1, "sft": 1}}], num_samples=400, global_batch_size=4)
    n_sft = len(components["sft"])
    assert blend.counts(400)["sft"] == 200 > n_sft
    c, j = blend.route(399)
    np.testing.assert_array_equal(blend[399]["input_ids"], blend.datasets[c][j % len(blend.datasets[c])]["input_ids"])


def test_schedule_problems_are_reported_at_once(components):
    bad = [{"until_step": 5, "weights": {"pre": 1, "code": 1}}, {"until_step": 3, "weights": {"pre": -1}},
           {"weights": {"sft": 1}}]
    with pytest.raises(ConfigError) as err:
        ScheduledBlend(components, bad, num_samples=100, global_batch_size=2)
    text = str(err.value)
    assert "unknown component(s) ['code']" in text and "phase 1" in text


def test_resume_across_the_boundary_with_another_world_size(components):
    torch = pytest.importorskip("torch")  # noqa: F841
    from tokenmill.loader import PackedLoader

    def ids(batch):
        return [tuple(s["input_ids"].tolist()) for s in batch]

    def blend():
        return ScheduledBlend(components, PHASES, num_samples=120, global_batch_size=8)

    reference = list(PackedLoader(blend(), batch_size=8, collate_fn=ids))  # ends by moving to epoch 1
    components["pre"].set_epoch(0)
    components["sft"].set_epoch(0)
    ranks = [PackedLoader(blend(), batch_size=4, collate_fn=ids, rank=r, world_size=2) for r in range(2)]
    got = []
    for step, pair in enumerate(zip(*ranks)):
        got.append(pair)
        if step == 11:  # two steps past the phase boundary (step 10)
            break
    state = ranks[0].state_dict()
    resumed = PackedLoader(blend(), batch_size=8, collate_fn=ids)
    resumed.load_state_dict(state)
    rest = list(resumed)
    served = [s for a, b in got for s in a + b] + [s for b in rest for s in b]
    assert sorted(served) == sorted(s for b in reference for s in b)  # nothing lost, nothing twice
    assert len(served) == len(reference) * 8
    assert [sorted(a + b) for a, b in got] == [sorted(b) for b in reference[:12]]  # the same steps, step by step


def test_mixture_caps_sources_and_repeats_others(write_shards):
    from tokenmill.loader import mixture

    rng = np.random.default_rng(5)
    big = PackedDataset(write_shards(pretrain_docs(rng, 600), name="big"), seq_len=16, mode="concat")
    small16 = PackedDataset(write_shards(sft_docs(rng, 30), name="small16"), seq_len=16)
    blend = mixture({"big": big, "small": small16}, cap=50, epochs={"small": 2})
    n_small = len(small16)
    assert len(big) > 50 and len(blend) == 50 + min(n_small, 50) * 2
    counts = blend.counts(len(blend))
    assert counts == [50, min(n_small, 50) * 2]
    with pytest.raises(ConfigError, match="unknown source"):
        mixture({"big": big}, caps={"nope": 3})


def test_phases_may_differ_in_seq_len_but_not_inside_a_phase(write_shards):
    rng = np.random.default_rng(2)
    directory = write_shards(pretrain_docs(rng, 200), name="pre")
    short, long = (PackedDataset(directory, seq_len=n, mode="concat") for n in (16, 64))
    blend = ScheduledBlend({"short": short, "long": long},
                           [{"until_step": 5, "weights": {"short": 1}}, {"weights": {"long": 1}}],
                           num_samples=14, global_batch_size=2)
    assert [blend[k]["input_ids"].size for k in (0, 9, 10, 13)] == [16, 16, 64, 64]
    with pytest.raises(ConfigError, match="phase 0: its components have different seq_len"):
        ScheduledBlend({"short": short, "long": long}, [{"weights": {"short": 1, "long": 1}}], num_samples=4,
                       global_batch_size=2)
