"""A small raw pool of two kinds of documents (web-shop text and encyclopedia-like text) and a reference set
like the second kind, written to files for the ``tokenmill select`` tests."""

from __future__ import annotations

import json
import random
from pathlib import Path

SHOP = ("buy cheap shoes now best price click here free shipping order today sale discount cart checkout "
        "deal offer coupon login account password newsletter subscribe").split()
WIKI = ("the history of the city dates back to the roman period when the river was a trade route and the "
        "population grew after the bridge was built in the century of the kingdom by its first bishop").split()


def doc(rng: random.Random, words: list[str], n: int) -> str:
    return " ".join(rng.choice(words) for _ in range(n)).capitalize() + "."


def write_pool(root: Path, *, shop: int = 120, wiki: int = 40, files: int = 2, seed: int = 0) -> tuple[list[str], str]:
    """``files`` JSONL files of shuffled shop and wiki documents (each 100-300 words, a few short ones), and
    a reference file of wiki-like documents; returns the raw paths and the reference path."""
    rng = random.Random(seed)
    docs = [doc(rng, SHOP, rng.randrange(100, 300)) for _ in range(shop)]
    docs += [doc(rng, WIKI, rng.randrange(100, 300)) for _ in range(wiki)]
    docs += [doc(rng, WIKI, 20) for _ in range(5)]  # under min_words: never drawn
    rng.shuffle(docs)
    raw = []
    for f in range(files):
        path = root / f"raw-{f}.jsonl"
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs[f::files]))
        raw.append(str(path))
    ref = root / "ref.jsonl"
    ref.write_text("".join(json.dumps({"text": doc(rng, WIKI, 150)}) + "\n" for _ in range(30)))
    return raw, str(ref)


def tree(root: Path) -> dict[str, bytes]:
    """Every file a run wrote but its state, lock, manifest and data card (they record times and options)."""
    skip = ("manifest.json", ".tokenmill.lock", "datacard.md", "datacard.json", "report.html")
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_state" not in p.parts and p.name not in skip}
