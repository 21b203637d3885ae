"""Recipe fixtures: shards written by the real tracks (run_pretrain / run_sft) on tiny generated data."""

from __future__ import annotations

import json
import random
from pathlib import Path

from wordkit import WORDS


def text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def write_web(path: Path, n: int, *, seed: int = 0, lo: int = 5, hi: int = 80) -> Path:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"web-{i}", "text": text(rng, lo, hi)}) + "\n")
    return path


def write_alpaca(path: Path, n: int, *, seed: int = 0) -> Path:
    rng = random.Random(seed)
    rows = [{"instruction": text(rng, 3, 12), "input": "", "output": text(rng, 5, 30)} for _ in range(n)]
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def make_sources(root: Path) -> dict[str, Path]:
    """web (pretraining, with a val/ split), sft (chat, with a val/ split) and long (few long documents)."""
    from tokenmill.pretrain import run_pretrain
    from tokenmill.sft.run import run_sft

    raw = root / "raw"
    raw.mkdir(parents=True)
    out = {"web": root / "shards" / "web", "sft": root / "shards" / "sft", "long": root / "shards" / "long"}
    run_pretrain([str(write_web(raw / "web.jsonl", 300))], out=out["web"], tokenizer="default", workers=1,
                 progress=False, val_count=20)
    run_sft([str(write_alpaca(raw / "chat.json", 120, seed=1))], out=out["sft"], tokenizer="default", workers=1,
            verify=0, progress=False, val_count=10)
    run_pretrain([str(write_web(raw / "long.jsonl", 12, seed=2, lo=400, hi=1500))], out=out["long"],
                 tokenizer="default", workers=1, progress=False)
    return out


RECIPE = """\
seq_len: 64
total_tokens: 40_000
batch: 4
world_size: 2
sources:
  web: {path: shards/web}
  sft: {path: shards/sft}
  long: {path: shards/long, upsample_long: {min_tokens: 512, factor: 2}}
phases:
  - {name: stable, share: 0.7, weights: {web: 1.0}}
  - {name: decay, share: 0.2, weights: {web: 0.7, sft: 0.3}}
  - {name: long, share: 0.1, seq_len: 512, weights: {web: 0.5, long: 0.5}}
"""
