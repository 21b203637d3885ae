"""A recipe's windows: SFT examples longer than a phase's window are warned about by the plan and drawn by
no one (neither the plan's tokens nor the loader's batches hold them)."""

from __future__ import annotations

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
