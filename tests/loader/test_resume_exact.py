"""Resume is exact: after 3 consecutive resumes the batches are bit-identical to an uninterrupted run; after
8 -> 6 ranks the ranks' batches of each global step are the uninterrupted run's global order; resuming at
every mixture transition and epoch end with the world size changing each time, every token the plan says is
read is read, as often as the plan says (each token of the shards has its own id: the oracle)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tokenmill.loader import PackedCollator, PackedLoader, load_recipe
from tokenmill.loader.plan import build_plan

torch = pytest.importorskip("torch")

EOS = 1
VOCAB = 1 << 17  # room for one id per token of every source
GLOBAL = 24  # 8 ranks x 3 = 6 ranks x 4 = 1 rank x 24
IDS: dict[str, np.ndarray] = {}  # source: the ids of its tokens (set by the fixture)
PHASES = {"stable": (0, 10), "decay": (10, 15), "long": (15, 18)}  # (first step, end step)


@pytest.fixture
def recipe(write_shards, tmp_path):
    """web (concat, also served at a second window), sft (bfd, loss masks), long (few long documents)."""
    rng, next_id = np.random.default_rng(11), [2]

    def docs(n, lo, hi, masked=False):
        out = []
        for _ in range(n):
            size = int(rng.integers(lo, hi + 1))
            ids = np.arange(next_id[0], next_id[0] + size)  # every token of the shards its own id
            next_id[0] += size
            mask = np.arange(size) >= size // 2 if masked else None
            out.append((ids, mask))
        return out

    for name, made, most in (("web", docs(200, 3, 60), 500), ("sft", docs(60, 6, 30, masked=True), 500),
                             ("long", docs(10, 100, 600), 2000)):
        write_shards(made, name=name, vocab=VOCAB, max_tokens=most)
        IDS[name] = np.arange(int(made[0][0][0]), int(made[-1][0][-1]) + 1)  # the source's tokens, in order
    path = tmp_path / "recipe.yaml"
    path.write_text("""
seq_len: 32
batch: 3
world_size: 8
sources: {web: {path: web}, sft: {path: sft}, long: {path: long}}
phases:
  - {name: stable, steps: 10, weights: {web: 1}}
  - {name: decay, steps: 5, weights: {web: 0.6, sft: 0.4}}
  - {name: long, steps: 3, seq_len: 128, weights: {web: 0.5, long: 0.5}}
""")
    return path


def rows(samples):
    return [tuple(s["input_ids"].tolist()) for s in samples]


def serve(recipe, segments, *, epochs=2):
    """Global steps ``(epoch, step, samples in global order)`` of a run cut into ``segments`` of
    ``(world_size, batch, steps)``; each segment is fresh loaders resumed from rank 0's state of the last."""
    out, state = [], None
    for world, batch, steps in segments:
        loaders = [PackedLoader.from_recipe(recipe, batch_size=batch, rank=r, world_size=world, collate_fn=rows)
                   for r in range(world)]
        for loader in loaders:
            if state is not None:
                loader.load_state_dict(state)
        while steps and loaders[0].epoch < epochs:
            left, epoch = loaders[0].steps_left(), loaders[0].epoch
            its = [iter(loader) for loader in loaders]
            for _ in range(min(steps, left)):
                step = loaders[0].cursor // GLOBAL
                parts = [next(it) for it in its]
                merged = [None] * GLOBAL
                for r, part in enumerate(parts):
                    merged[r::world] = part  # rank r holds global positions r, r + W, ...
                out.append((epoch, step, merged))
                steps -= 1
            if steps:  # the epoch's end: the iterators finish it and turn to the next epoch
                for it in its:
                    assert next(it, None) is None
        state = loaders[0].state_dict()
    return out


def test_three_consecutive_resumes_give_bit_identical_batches(recipe):
    def loader():
        return PackedLoader.from_recipe(recipe, batch_size=GLOBAL, world_size=1,
                                        collate_fn=PackedCollator(pad_id=0, block_diag_mask=True))

    uninterrupted = loader()
    reference = list(uninterrupted) + list(uninterrupted)  # two epochs
    got, current = [], loader()
    for stop in (4, 11, 16, 18 + 2):  # inside stable, past each transition, inside the next epoch
        while len(got) < stop:
            for batch in current:
                got.append(batch)
                if len(got) == stop:
                    break
        state = current.state_dict()
        current = loader()
        current.load_state_dict(state)  # resumes 1, 2, 3 and 4
    got += list(current)  # the rest of the second epoch
    assert len(got) == len(reference) == 36
    differ = [(i, k) for i, (a, b) in enumerate(zip(got, reference)) for k in a if not torch.equal(a[k], b[k])]
    assert differ == [] and all(a.keys() == b.keys() for a, b in zip(got, reference))


def test_eight_ranks_resumed_on_six_serve_the_global_order(recipe):
    reference = serve(recipe, [(1, GLOBAL, 36)])
    resumed = serve(recipe, [(8, 3, 12), (6, 4, 36)])
    assert [s for _, _, s in resumed] == [s for _, _, s in reference]
    assert [(e, t) for e, t, _ in resumed] == [(e, t) for e, t, _ in reference] == \
        [(e, t) for e in range(2) for t in range(18)]


def test_resumes_at_every_transition_and_epoch_end_read_every_token_as_planned(recipe):
    segments = [(8, 3, 10), (6, 4, 5), (8, 3, 3), (6, 4, 1), (8, 3, 9), (6, 4, 18)]  # cuts at 10, 15, 18, 19, 28
    resumed = serve(recipe, segments)
    assert resumed == serve(recipe, [(1, GLOBAL, 36)])  # nothing repeated, dropped or reordered
    plan = build_plan(load_recipe(recipe))
    epoch0 = [s for e, _, s in resumed if e == 0]
    tokens, samples, reads = {}, Counter(), Counter()
    for step, batch in enumerate(epoch0):
        phase = next(n for n, (lo, hi) in PHASES.items() if lo <= step < hi)
        for ids in batch:
            source = next(n for n, ids_of in IDS.items() if ids_of[0] <= ids[0] <= ids_of[-1])
            tokens.setdefault(phase, Counter())[source] += len(ids)
            samples[phase, source] += 1
            reads.update(ids)
    for p in plan["phases"]:
        assert dict(tokens[p["name"]]) == p["tokens"]
        assert {s: samples[p["name"], s] for s in p["samples_by_source"]} == p["samples_by_source"]
    for name, s in plan["sources"].items():
        ids = IDS[name]
        times = np.array([reads[i] for i in ids])
        assert int(times.sum()) == s["tokens_drawn"]
        assert s["epochs"] == int(times.sum()) / ids.size
        assert s["repeated_share"] == int((times > 1).sum()) / ids.size
        assert s["unread_share"] == int((times == 0).sum()) / ids.size
    assert sum(len(ids) for e, _, b in resumed if e == 1 for ids in b) > 0  # the second epoch is served too
