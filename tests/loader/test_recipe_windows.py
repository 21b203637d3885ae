"""A recipe's windows: SFT examples longer than a phase's window are warned about by the plan and drawn by
no one (neither the plan's tokens nor the loader's batches hold them)."""

from __future__ import annotations

import json

import numpy as np
from loaderkit import EOS

from tokenmill.cli import main
from tokenmill.loader import PackedLoader, load_recipe
from tokenmill.loader.plan import build_plan


def _sft(rng, n, lo, hi):
    out = []
    for _ in range(n):
        x = rng.integers(2, 60, size=int(rng.integers(lo, hi + 1)))
        x[-1] = EOS
        mask = np.zeros(x.size, np.bool_)
        mask[x.size // 2:] = True
        out.append((x, mask))
    return out


def test_plan_warns_about_sft_examples_longer_than_the_window_and_does_not_count_them(write_shards, tmp_path,
                                                                                       capsys):
    rng = np.random.default_rng(5)
    docs = _sft(rng, 60, 6, 30) + _sft(rng, 7, 40, 60)  # 7 examples longer than the 32-token window
    write_shards(docs, name="sft")
    path = tmp_path / "recipe.yaml"
    path.write_text("seq_len: 32\nbatch: 4\nsources: {sft: {path: sft}}\nphases:\n"
                    "  - {name: only, steps: 5, weights: {sft: 1}}\n")
    plan = build_plan(load_recipe(path))
    over = [w for w in plan["warnings"] if "longer than the window" in w]
    long_tokens = sum(int(x.size) for x, _ in docs[60:])
    assert len(over) == 1 and "7 of 67 examples" in over[0] and f"({long_tokens:,} tokens)" in over[0]
    batches = list(PackedLoader.from_recipe(path, collate_fn=lambda samples: samples))
    drawn = sum(int(s["input_ids"].size) for batch in batches for s in batch)
    assert drawn == plan["phases"][0]["tokens"]["sft"] == plan["tokens_drawn"]
    assert max(int(n) for batch in batches for s in batch for n in s["seq_lens"]) <= 32
    assert main(["plan", str(path), "--out", str(tmp_path / "plan")]) == 0
    assert "warning: source 'sft': 7 of 67 examples" in capsys.readouterr().out


def test_each_phase_may_set_its_own_batch_and_the_log_agrees_with_the_plan(write_shards, tmp_path, capsys):
    rng = np.random.default_rng(6)
    web = []
    for _ in range(300):
        x = rng.integers(2, 60, size=int(rng.integers(3, 60)))
        x[-1] = EOS
        web.append((x, None))
    write_shards(web, name="web")
    write_shards(_sft(rng, 80, 6, 30), name="sft")
    path = tmp_path / "recipe.yaml"
    path.write_text("""
seq_len: 32
batch: 4
world_size: 2
sources: {web: {path: web}, sft: {path: sft}}
phases:
  - {name: stable, steps: 6, weights: {web: 1}}
  - {name: decay, steps: 5, batch: 2, weights: {web: 0.6, sft: 0.4}}
  - {name: long, tokens: 12288, batch: 6, seq_len: 64, weights: {web: 1}}
""")
    recipe = load_recipe(path)
    assert [p.batch for p in recipe.phases] == [None, 2, 6]
    assert recipe.phases[2].steps == 12288 // (64 * 6 * 2)  # a length in tokens is cut into this phase's steps
    plan = build_plan(recipe)
    assert [(p["start_step"], p["end_step"], p["global_batch"], p["samples"]) for p in plan["phases"]] == \
        [(0, 6, 8, 48), (6, 11, 4, 20), (11, 27, 12, 192)]
    assert plan["total_samples"] == 260
    ranks = [PackedLoader.from_recipe(path, rank=r, collate_fn=lambda s: s, log_dir=tmp_path / "log")
             for r in range(2)]
    assert ranks[0].steps_left() == 27
    sizes = []
    for step, (a, b) in enumerate(zip(*ranks)):
        sizes.append((len(a), len(b)))
        if step == 8:  # resumed mid-decay, where steps are smaller
            state = ranks[0].state_dict()
            ranks = [PackedLoader.from_recipe(path, rank=r, collate_fn=lambda s: s, log_dir=tmp_path / "log")
                     for r in range(2)]
            for loader in ranks:
                loader.load_state_dict(state)
            break
    for a, b in zip(*ranks):
        sizes.append((len(a), len(b)))
    assert sizes == [(4, 4)] * 6 + [(2, 2)] * 5 + [(6, 6)] * 16
    assert main(["plan", str(path), "--check", str(tmp_path / "log"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["problems"] == [] and result["served_samples"] == 260
    assert [p["consumed"] for p in result["phases"]] == [p["tokens"] for p in plan["phases"]]
    steps = [json.loads(line)["step"] for line in (tmp_path / "log" / "consumed.rank1.jsonl").read_text().splitlines()
             if json.loads(line)["kind"] == "step"]
    assert steps == list(range(27))
