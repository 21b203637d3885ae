"""A documents file is written a row group at a time: a worker holds about ``ROW_GROUP_BYTES`` of a unit's
documents, not the whole unit, and the run keeps the same documents, ledger and stage parts."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
from curatekit import ENGLISH

from tokenmill.curate.workflows import tasks
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.report.accounting import Stats
from tokenmill.steps.cascade import Cascade


def _corpus(path, n: int, seed: int = 0) -> None:
    """``n`` English documents, every tenth an exact copy of an earlier one and every tenth a near copy."""
    rng = random.Random(seed)
    words = " ".join(ENGLISH).split()
    texts: list[str] = []
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            if i > 20 and i % 10 == 3:
                text = rng.choice(texts)
            elif i > 20 and i % 10 == 7:
                text = rng.choice(texts) + " " + rng.choice(words)
            else:
                text = "\n\n".join("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(8, 25)))
                                             for _ in range(rng.randint(2, 4))) for _ in range(rng.randint(2, 6)))
            texts.append(text)
            fh.write(json.dumps({"id": f"d{i}", "text": text, "url": f"https://site{i % 7}.example.org/{i}"}) + "\n")


def _run(src, out, monkeypatch, row_group_bytes: int) -> None:
    monkeypatch.setattr(tasks, "ROW_GROUP_BYTES", row_group_bytes)
    run_curate([str(src)], out=out, preset="refinedweb", steps=[{"name": "exact_dedup"}, {"name": "minhash_dedup"}],
               workers=1, report=False, unit_bytes=64 << 20)


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_row_groups_keep_the_documents_and_ledgers(tmp_path, monkeypatch):
    src = tmp_path / "in.jsonl"
    _corpus(src, 2500)
    whole, grouped = tmp_path / "whole", tmp_path / "grouped"
    _run(src, whole, monkeypatch, 64 << 20)  # every unit one row group: the bytes of one write
    _run(src, grouped, monkeypatch, 64 << 10)  # every read block of 1,024 documents a row group
    (w_docs,), (g_docs,) = list((whole / "documents").glob("*.parquet")), list((grouped / "documents").glob("*.parquet"))
    assert pq.ParquetFile(w_docs).metadata.num_row_groups == 1
    groups = pq.ParquetFile(g_docs).metadata
    assert groups.num_row_groups >= 2  # the later stages read the earlier stages' grouped files too
    assert pq.read_table(g_docs).equals(pq.read_table(w_docs))
    for d in ("ledger", "steps"):
        assert {p.relative_to(whole).as_posix(): _digest(p) for p in (whole / d).rglob("*.parquet")} == \
               {p.relative_to(grouped).as_posix(): _digest(p) for p in (grouped / d).rglob("*.parquet")}
    assert json.loads((whole / "manifest.json").read_text())["counts"] == \
           json.loads((grouped / "manifest.json").read_text())["counts"]


def test_writer_holds_one_row_group_and_a_batch(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks, "ROW_GROUP_BYTES", 1 << 20)
    writer = tasks._Writer(tmp_path, "documents/u.parquet", "ledger/u.parquet")
    text = "word " * 20_000  # 100 KB a document
    most, written = 0, []
    for b in range(40):
        batch = pa.RecordBatch.from_pylist([{"id": f"{b}-{i}", "text": text, "source": "in.jsonl", "meta": None,
                                             "loc": b * 3 + i} for i in range(3)], schema=tasks.DOCS_SCHEMA)
        writer._hold(batch)
        most = max(most, writer.held)
        written.append(batch)
    writer.close()
    assert most < (1 << 20) + 3 * 100_100  # never more than a row group and one batch: 40 batches are 12 MB
    got = pq.ParquetFile(tmp_path / "documents/u.parquet")
    assert got.metadata.num_row_groups == 10  # four batches (1.2 MB) a row group
    assert got.read().equals(pa.Table.from_batches(written))


def test_scoring_holds_a_joined_batch_once(tmp_path):
    """Read batches joined for scoring are let go once joined, and a batch nothing removes is not copied: while
    a step scores, Arrow holds the joined batch about once (it held the read batches beside their copy, and
    the kept documents beside both)."""
    seen: list[tuple[int, int]] = []

    def cascade(docs, locs):
        seen.append((pa.total_allocated_bytes(), docs.nbytes))
        result = Cascade(())(docs, locs)
        assert result.kept is docs  # nothing removed: the same batch, not a copy
        return result

    text = "word " * 50_000  # 250 KB a document

    def batches():
        for b in range(4):  # four read batches of 1 MB, joined into one of 4 MB (SCORE_BYTES is 8 MiB)
            yield pa.RecordBatch.from_pylist([{"id": f"{b}-{i}", "text": text, "source": "in.jsonl", "meta": None,
                                               "loc": b * 4 + i} for i in range(4)], schema=tasks.DOCS_SCHEMA)

    base = pa.total_allocated_bytes()
    writer = tasks._Writer(tmp_path, "documents/u.parquet", "ledger/u.parquet")
    tasks._score_all(cascade, batches(), writer, Stats(), Counter(), score_rows=1_000)
    writer.close()
    (held, joined), = seen
    assert joined > 4_000_000 and held - base < 1.5 * joined
