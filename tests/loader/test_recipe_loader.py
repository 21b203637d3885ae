"""PackedLoader.from_recipe draws exactly what the plan says, resumes across a phase boundary with another
world size, writes a log that `plan --check` reads back, and every loader object names its tokenizer."""

from __future__ import annotations

import json

import numpy as np
import pytest
from loaderkit import EOS, PAD, VOCAB

from tokenmill.cli import main
from tokenmill.loader import (
    BlendedDataset,
    PackedDataset,
    PackedLoader,
    RecipeDataset,
    RunLog,
    ScheduledBlend,
    check_run,
    load_recipe,
)
from tokenmill.loader.plan import build_plan

RANGES = {"web": (2, 40), "sft": (40, 70), "long": (70, VOCAB)}  # each source its own ids: the oracle


def docs_in(rng, n, lo, hi, *, ids, masked=False):
    out = []
    for _ in range(n):
        x = rng.integers(*ids, size=int(rng.integers(lo, hi + 1)))
        x[-1] = EOS
        mask = None
        if masked:
            mask = np.zeros(x.size, np.bool_)
            mask[x.size // 2:] = True
        out.append((x, mask))
    return out


def source_of_id(i: int) -> str | None:
    return next((s for s, (lo, hi) in RANGES.items() if lo <= i < hi), None)


@pytest.fixture
def recipe(write_shards, tmp_path):
    rng = np.random.default_rng(3)
    write_shards(docs_in(rng, 300, 3, 60, ids=RANGES["web"]), name="web")
    write_shards(docs_in(rng, 80, 6, 30, ids=RANGES["sft"], masked=True), name="sft")
    write_shards(docs_in(rng, 10, 100, 700, ids=RANGES["long"]), name="long", max_tokens=2000)
    path = tmp_path / "recipe.yaml"
    path.write_text("""
seq_len: 32
batch: 4
world_size: 2
sources:
  web: {path: web}
  sft: {path: sft}
  long: {path: long, upsample_long: {min_tokens: 400, factor: 3}}
phases:
  - {name: stable, steps: 30, weights: {web: 1}}
  - {name: decay, steps: 10, weights: {web: 0.6, sft: 0.4}}
  - {name: long, steps: 4, seq_len: 256, weights: {web: 0.5, long: 0.5}}
""")
    return path


def identity(samples):
    return samples


def count(batches, starts: list[int]) -> dict:
    """Tokens by phase and source, read off the ids the batches hold (global step i, its phase by step)."""
    names = ["stable", "decay", "long"]
    out = {n: {} for n in names}
    for step, batch in enumerate(batches):
        phase = names[max(i for i, s in enumerate(starts) if step >= s)]
        for sample in batch:
            ids = sample["input_ids"]
            src = {source_of_id(int(i)) for i in ids if i != EOS}
            assert len(src) == 1  # one sample, one source
            src = src.pop()
            out[phase][src] = out[phase].get(src, 0) + ids.size
    return {k: v for k, v in out.items() if v}


def test_the_loader_draws_exactly_the_plan(recipe):
    plan = build_plan(load_recipe(recipe))
    batches = list(PackedLoader.from_recipe(recipe, batch_size=8, world_size=1, collate_fn=identity))
    assert len(batches) == plan["total_steps"] == 44
    drawn = count(batches, [p["start_step"] for p in plan["phases"]])
    assert drawn == {p["name"]: p["tokens"] for p in plan["phases"]}
    assert all(s["input_ids"].size == 256 for s in batches[-1])  # the long phase's windows


def test_resume_across_phase_boundaries_with_another_world_size(recipe, tmp_path):
    def ids(batch):
        return [tuple(s["input_ids"].tolist()) for s in batch]

    reference = list(PackedLoader.from_recipe(recipe, batch_size=8, world_size=1, collate_fn=ids))
    ranks = [PackedLoader.from_recipe(recipe, rank=r, collate_fn=ids, log_dir=tmp_path / "log") for r in range(2)]
    got = []
    for step, pair in enumerate(zip(*ranks)):
        got.append(pair)
        if step == 31:  # two steps into the decay phase
            break
    state = ranks[0].state_dict()
    later = [PackedLoader.from_recipe(recipe, batch_size=2, rank=r, world_size=4, collate_fn=ids,
                                      log_dir=tmp_path / "log") for r in range(4)]
    for loader in later:
        loader.load_state_dict(state)
    rest = list(zip(*later))
    assert [sorted(a + b) for a, b in got] == [sorted(b) for b in reference[:32]]
    assert [sorted(sum(parts, [])) for parts in rest] == [sorted(b) for b in reference[32:]]  # across "long" too
    result = check_run(build_plan(load_recipe(recipe)), tmp_path / "log")
    assert result["problems"] == [] and result["served_samples"] == 44 * 8


def test_check_names_a_run_that_stopped_early_or_replayed(recipe, tmp_path, capsys):
    loader = PackedLoader.from_recipe(recipe, batch_size=8, world_size=1, collate_fn=identity, log_dir=tmp_path / "a")
    for step, _ in enumerate(loader):
        if step == 34:
            break
    state = loader.state_dict()
    again = PackedLoader.from_recipe(recipe, batch_size=8, world_size=1, collate_fn=identity, log_dir=tmp_path / "a")
    state["cursor"] -= 3 * 8  # resumed from an older checkpoint: three steps served twice
    again.load_state_dict(state)
    list(again)
    assert main(["plan", str(recipe), "--check", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "24 replayed after a resume" in out and "OK: the run consumed what the plan says" in out
    short = PackedLoader.from_recipe(recipe, batch_size=8, world_size=1, collate_fn=identity, log_dir=tmp_path / "b")
    for step, _ in enumerate(short):
        if step == 9:
            break
    assert main(["plan", str(recipe), "--check", str(tmp_path / "b"), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["served_samples"] == 80 and "stopped early" in result["problems"][0]
    assert main(["plan", str(recipe), "--check", str(tmp_path / "nothing")]) == 1


def test_validation_per_phase_is_logged_and_read_back(recipe, tmp_path):
    dataset = RecipeDataset(recipe)
    assert dataset.validation("decay") == {}  # these sources have no val/ split
    log = RunLog(tmp_path / "log", rank=0, dataset=dataset)
    log.validation(step=35, phase="decay", source="sft", loss=2.5)
    with pytest.raises(Exception, match="no phase 'cooldown'"):
        dataset.validation("cooldown")
    plan = build_plan(dataset.recipe)
    assert check_run(plan, tmp_path / "log")["validation"] == {"decay": {"sft": [[35, 2.5]]}}


def test_a_phase_that_ignores_masks_trains_every_token(recipe, tmp_path):
    text = recipe.read_text().replace("weights: {web: 0.6, sft: 0.4}}", "weights: {web: 0.6, sft: 0.4}, ignore_loss_mask: true}")
    path = tmp_path / "all.yaml"
    path.write_text(text.replace("path: web", f"path: {recipe.parent / 'web'}").replace(
        "path: sft", f"path: {recipe.parent / 'sft'}").replace("path: long", f"path: {recipe.parent / 'long'}"))
    masked, trained = RecipeDataset(recipe), RecipeDataset(path)
    k = next(k for k in range(30 * 8, 40 * 8) if masked.source_of(k) == "sft")
    assert not masked[k]["loss_mask"].all() and trained[k]["loss_mask"].all()
    assert masked.fingerprint != trained.fingerprint  # a state saved under one is refused by the other


def test_every_loader_object_names_its_tokenizer(recipe):
    web = PackedDataset(recipe.parent / "web", seq_len=32, mode="concat")
    objects = [web, BlendedDataset([(web, 1.0)]), ScheduledBlend({"w": web}, [{"weights": {"w": 1}}], num_samples=8,
                                                                  global_batch_size=4),
               RecipeDataset(recipe), PackedLoader.from_recipe(recipe)]
    for obj in objects:
        assert (obj.vocab_size, obj.pad_id, obj.eos_id, obj.tokenizer_fingerprint) == (VOCAB, PAD, EOS, "fp-test")


def test_the_recipe_dataset_pickles_and_serves_the_same_with_workers(recipe):
    import pickle

    pytest.importorskip("torch")
    dataset = RecipeDataset(recipe)
    again = pickle.loads(pickle.dumps(dataset))
    for k in range(0, len(dataset), 13):
        np.testing.assert_array_equal(dataset[k]["input_ids"], again[k]["input_ids"])

    def ids(batch):
        return [s["input_ids"].tolist() for s in batch]

    one = list(PackedLoader.from_recipe(recipe, batch_size=8, world_size=1, collate_fn=ids))
    two = list(PackedLoader.from_recipe(recipe, batch_size=8, world_size=1, collate_fn=ids, num_workers=2))
    assert one == two


def test_a_torn_last_log_line_is_forgiven_a_damaged_one_is_not(recipe, tmp_path):
    loader = PackedLoader.from_recipe(recipe, batch_size=8, world_size=1, collate_fn=identity, log_dir=tmp_path / "l")
    list(loader)
    log = tmp_path / "l" / "consumed.rank0.jsonl"
    plan = build_plan(load_recipe(recipe))
    with open(log, "a") as fh:
        fh.write('{"kind": "step", "fir')  # killed mid-write
    assert check_run(plan, tmp_path / "l")["problems"] == []
    log.write_text("garbage\n" + log.read_text())
    with pytest.raises(Exception, match="consumed.rank0.jsonl:1: not a JSON line"):
        check_run(plan, tmp_path / "l")
