"""A small web-like corpus with exact and near duplicates for the curation runs on Ray, and a step that
kills its own worker process once (to show Ray's retry)."""

from __future__ import annotations

import json
import os
import random
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa

from tokenmill.steps.contract import Scored

WORDS = ("river library garden station bakery teacher council market museum harbour village doctor bridge "
         "school forest island factory kitchen winter letter opened visited described repaired painted measured "
         "discussed closed found built old new quiet busy small famous local early bright careful morning evening "
         "paper music water voice window table story engine family history summer weather mountain valley city "
         "street house road field farmer student teacher children parents friends neighbours money price wheat "
         "bread cheese apples orchard railway ticket journey holiday letter report meeting budget plan project "
         "result question answer reason problem idea picture camera painting concert theatre festival").split()
GERMAN = "\n".join(["Der Ausschuss hat am Dienstag über den neuen Haushalt der Bibliothek und die Öffnungszeiten "
                    "der Zweigstelle beraten, und die Mitglieder waren sich am Ende weitgehend einig."] * 2)
STOP = "the of and to with that have be in a for on was it is".split()
# the DCLM-shaped steps that run without a quality model: URL, English, RefinedWeb's heuristics, then
# exact and fuzzy dedup
STEPS = [{"name": "url"}, {"name": "language", "languages": ["en"], "threshold": 0.65},
         {"name": "gopher_repetition"}, {"name": "gopher_quality"}, {"name": "refinedweb"},
         {"name": "exact_dedup"}, {"name": "minhash_dedup", "partition_edges": 40}]


def sentence(rng: random.Random) -> str:
    words = [rng.choice(STOP) if rng.random() < 0.35 else rng.choice(WORDS) for _ in range(rng.randrange(10, 16))]
    return " ".join(words).capitalize() + "."


def document(rng: random.Random) -> str:
    lines = [" ".join(sentence(rng) for _ in range(3)) for _ in range(rng.randrange(5, 9))]
    return "\n".join(lines)


def write_web_corpus(path: Path, n: int = 90, *, seed: int = 0) -> Path:
    """``n`` documents with URLs, then exact copies and one-sentence edits of some of them, shuffled."""
    rng = random.Random(seed)
    docs = [document(rng) for _ in range(n)]
    copies = [docs[i] for i in range(0, n, 7)]  # exact
    for i in range(3, n, 6):  # near: the last sentence replaced
        lines = docs[i].split("\n")
        lines[-1] = lines[-1].rsplit(". ", 1)[0] + ". " + sentence(rng)
        copies.append("\n".join(lines))
    rows = [{"text": t, "url": f"https://site{k % 5}.example.org/page/{k}"} for k, t in enumerate(docs + copies)]
    rows[1]["url"] = "https://www.site.org/porn-pics/1"  # removed by the URL filter
    rows += [{"text": GERMAN, "url": "https://de.example.org/"}, {"text": "Too short.", "url": None}]
    rng.shuffle(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@dataclass(frozen=True)
class DieOnce:
    """A document step that keeps everything, except that the first worker process to score a batch while
    ``flag`` does not exist creates it and kills itself with SIGKILL (no cleanup, no exception)."""

    flag: str
    name: ClassVar[str] = "die_once"
    version: ClassVar[int] = 1

    def setup(self) -> None:
        pass

    def score(self, batch: pa.RecordBatch) -> Scored:
        if not os.path.exists(self.flag):
            Path(self.flag).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return Scored({"ok": np.ones(batch.num_rows, dtype=bool)})

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.full(len(scores["ok"]), None, dtype=object)
