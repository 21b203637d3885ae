"""Small reference texts for the n-gram model tests, made in tmp_path."""

from __future__ import annotations

import json
import random
from pathlib import Path

LETTERS = "abcdefghij"


def synthetic_docs(n: int = 400, seed: int = 0) -> list[str]:
    """Documents of a few lines each over a small vocabulary with a skewed (Zipf-like) word choice, so
    that every order has n-grams seen once, twice, three and four times (the discounts are estimated)."""
    rng = random.Random(seed)
    words = sorted({"".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 5))) for _ in range(80)})
    weights = [1 / (i + 1) for i in range(len(words))]
    docs = []
    for _ in range(n):
        lines = [" ".join(rng.choices(words, weights, k=rng.randint(1, 14))) for _ in range(rng.randint(1, 4))]
        docs.append("\n".join(lines))
    return docs


def write_jsonl(path: Path, docs: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    return path
