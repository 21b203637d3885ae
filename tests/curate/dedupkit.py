"""A small upstream documents stage for dedup tests, and helpers to run a step's stages after it."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.base import segments
from tokenmill.engine import (
    LocalExecutor,
    Stage,
    StagePlan,
    Unit,
    UnitResult,
    run_workflow,
)
from tokenmill.records import DOCUMENT
from tokenmill.report.accounting import Stats


@dataclass(frozen=True)
class SourceTask:
    """Writes one unit's documents (a list of texts in the payload) as docs Parquet + a minimal ledger."""

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        texts, extra = unit.payload
        ids = [f"{unit.name}:{i}" for i in range(len(texts))]
        table = pa.table({"id": ids, "text": texts, "source": [unit.name] * len(texts),
                          "url": [None] * len(texts), "license": [None] * len(texts),
                          "meta": [None] * len(texts)}, schema=DOCUMENT)
        docs, ledger = f"source/docs/{unit.name}.parquet", f"source/ledger/{unit.name}.parquet"
        (staging / "source/docs").mkdir(parents=True)
        (staging / "source/ledger").mkdir(parents=True)
        pq.write_table(table, staging / docs)
        cols = {"id": ids, "source": [unit.name] * len(texts), **{k: list(v) for k, v in extra.items()},
                "kept": [True] * len(texts), "reason": pa.array([None] * len(texts), pa.string())}
        pq.write_table(pa.table(cols), staging / ledger)
        n = len(texts)
        return UnitResult(stats=Stats(input=n, kept=n), outputs=[docs, ledger],
                          data={"docs": docs, "ledger": ledger, "unit": unit.name})


def source_stage(units: list[list[str]], extra: list[dict] | None = None) -> Stage:
    extra = extra or [{} for _ in units]

    def plan(ctx):
        return StagePlan([Unit(i, f"unit-{i:06d}", payload=(texts, extra[i])) for i, texts in enumerate(units)],
                         SourceTask(), {"units": json.dumps(units, sort_keys=True), "extra": repr(extra)})

    return Stage("source", 1, plan)


def run_step(step, units, out, *, workers=1, extra=None):
    stages = [source_stage(units, extra), *step.stages("source")]
    return run_workflow(stages, out=out, fingerprint="test", executor=LocalExecutor(workers=workers))


def final(results, step):
    return results[step.stages("source")[-1].name]


def survivors(out: Path, results, step) -> list[str]:
    ids = []
    for r in final(results, step):
        ids += pq.read_table(segments.arrow_source(Path(out) / r.data["docs"]), columns=["id"]).column("id").to_pylist()
    return ids


def ledger(out: Path, results, step) -> pa.Table:
    return pa.concat_tables([pq.read_table(Path(out) / r.data["ledger"]) for r in final(results, step)])


def tree(root: Path) -> dict[str, bytes]:
    """Every file of a run but its state, by path: a file in a segment (base/segments.py) by its own path and
    bytes, not the segment's (which process wrote which unit is not part of the output)."""
    root = Path(root)
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
             if p.is_file() and "_state" not in p.parts and not _in_segments(p)}
    for index in root.rglob(segments.INDEX):
        for rel in segments.listing(index.parent):
            with segments.open_slice(index.parent / rel) as fh:
                files[str((index.parent / rel).relative_to(root))] = fh.read()
    return dict(sorted(files.items()))


def _in_segments(p: Path) -> bool:
    return p.name == segments.INDEX or (p.name.startswith(segments.PREFIX) and p.name.endswith(segments.SUFFIX))


WORDS = [
    "time", "person", "year", "way", "day", "thing", "man", "world", "life", "hand", "part", "child", "eye",
    "woman", "place", "work", "week", "case", "point", "government", "company", "number", "group", "problem",
    "fact", "house", "river", "stone", "light", "paper", "music", "garden", "letter", "market", "winter",
    "summer", "island", "forest", "engine", "window", "doctor", "teacher", "story", "table", "water", "voice",
]


def random_text(rng: random.Random, n_words: int) -> str:
    lines, line = [], []
    for _ in range(n_words):
        line.append(rng.choice(WORDS) + (str(rng.randrange(1000)) if rng.random() < 0.3 else ""))
        if len(line) >= 12:
            lines.append(" ".join(line).capitalize() + ".")
            line = []
    if line:
        lines.append(" ".join(line) + ".")
    return "\n".join(lines)


def edited(rng: random.Random, text: str, rate: float) -> str:
    """A near-duplicate: a share ``rate`` of the words substituted, case and spacing changed."""
    words = text.split(" ")
    for i in range(len(words)):
        if rng.random() < rate:
            words[i] = rng.choice(WORDS) + "x"
    out = " ".join(words)
    return out.upper() if rng.random() < 0.3 else out.replace(" ", "  ", 3)


def planted_corpus(seed: int, n_base: int, n_words: int = 200) -> tuple[list[str], list[tuple[int, int]]]:
    """Random documents plus edited copies of some (exact with case/space changes, word substitutions at
    1-3%, a boilerplate line added, a line deleted); returns the texts and the planted (copy, original)."""
    rng = random.Random(seed)
    texts = [random_text(rng, n_words) for _ in range(n_base)]
    planted = []
    for i in range(0, n_base, 2):
        kind = (i // 2) % 5
        src = texts[i]
        if kind == 0:
            copy = src.upper().replace(" ", "\t", 5)
        elif kind in (1, 2):
            copy = edited(rng, src, 0.01 * kind)
        elif kind == 3:
            copy = src + "\nSubscribe to our newsletter for more stories like this one."
        else:
            lines = src.split("\n")
            del lines[len(lines) // 2]
            copy = "\n".join(lines)
        planted.append((len(texts), i))
        texts.append(copy)
    order = list(range(len(texts)))
    rng.shuffle(order)
    where = {old: new for new, old in enumerate(order)}
    return [texts[o] for o in order], [(where[a], where[b]) for a, b in planted]


def split_units(texts: list[str], n: int) -> list[list[str]]:
    size = -(-len(texts) // n)
    return [texts[i:i + size] for i in range(0, len(texts), size)]
