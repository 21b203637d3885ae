"""Scoring several read batches together changes no byte: documents, ledger and stage ledger parts are those of
every read batch scored on its own (the row chunks of the documents file included)."""

from __future__ import annotations

import hashlib
import json
import random

import pyarrow.parquet as pq
import pytest
from curatekit import ENGLISH, OTHER

from tokenmill.curate.workflows import tasks
from tokenmill.curate.workflows.curate import run_curate


def _corpus(path, n: int, seed: int = 0):
    """``n`` documents: English and other languages, repeated lines and paragraphs, short and empty texts,
    upper-case and numeric lines, a few bad records (rejects inside read batches)."""
    rng = random.Random(seed)
    words = " ".join(ENGLISH).split()
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            kind = rng.random()
            if kind < 0.1:
                text = rng.choice(OTHER)
            elif kind < 0.13:
                text = rng.choice(["", "   ", "ok", "1 2 3 4 5 6 7 8 9"])
            else:
                paras = []
                for _ in range(rng.randint(2, 12)):
                    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 25))) for _ in range(rng.randint(1, 4))]
                    if rng.random() < 0.2:
                        lines.append("ALL RIGHTS RESERVED 2024 | 12 345 678")
                    if rng.random() < 0.04:
                        lines = lines * 3  # repeated lines: Gopher repetition's rules
                    paras.append("\n".join(lines))
                text = "\n\n".join(paras + ([paras[0]] if rng.random() < 0.2 else []))
            if i % 997 == 5:
                fh.write('{"text": 12345}\n')  # a reject in the middle of a read batch
            fh.write(json.dumps({"id": f"d{i}", "text": text, "url": f"https://site{i % 7}.example.org/{i}"}) + "\n")


def _digests(out):
    files = sorted(p for d in ("documents", "ledger", "steps") for p in (out / d).rglob("*.parquet"))
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.mark.parametrize("preset", ["refinedweb", "c4"])
def test_joined_batches_write_the_bytes_of_batches_scored_alone(tmp_path, monkeypatch, preset):
    src = tmp_path / "in.jsonl"
    _corpus(src, 3100)
    runs = {}
    # 1: every read batch of 1,024 alone (as before); 2,500: two or three joined; 4,096 rows but at most 256 KiB:
    # a read batch of this corpus is past the bytes bound alone, so each is scored on its own
    for rows, nbytes in ((1, 8 << 20), (2500, 8 << 20), (4096, 256 << 10)):
        monkeypatch.setattr(tasks, "SCORE_ROWS", rows)
        monkeypatch.setattr(tasks, "SCORE_BYTES", nbytes)
        out = tmp_path / f"out{rows}"
        run_curate([str(src)], out=out, preset=preset, workers=1, report=False, unit_bytes=64 << 20)
        runs[rows] = _digests(out)
    assert runs[1] and runs[1] == runs[2500] == runs[4096]
    if preset == "refinedweb":  # kept documents of several read batches in one file: their chunks matter
        kept = pq.ParquetFile(next((tmp_path / "out2500" / "documents").glob("*.parquet")))
        assert kept.metadata.num_rows > 1024
