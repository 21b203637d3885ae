"""Corpus steps in a step list become their own stages between the document stages (the composition)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
from curatekit import write_corpus

from tokenmill.curate.report.funnel import recompute
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.curate.workflows.tasks import DOCS_SCHEMA
from tokenmill.engine.stage import Stage, StagePlan, Unit, UnitResult
from tokenmill.report.accounting import Stats
from tokenmill.steps import read_table


@dataclass(frozen=True)
class _DropRepeats:
    """Unit k drops the documents whose text appeared in units 0..k (or earlier in unit k)."""

    out: str
    upstream_docs: tuple[str, ...]
    stage: str

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        seen = set()
        for rel in self.upstream_docs[:unit.index]:  # the upstream files may lie in segment files: read_table
            seen.update(read_table(Path(self.out) / rel).column("text").to_pylist())
        docs = read_table(Path(self.out) / self.upstream_docs[unit.index])
        dup = []
        for t in docs.column("text").to_pylist():
            dup.append(t in seen)
            seen.add(t)
        keep = pa.array([not d for d in dup])
        reason = pa.array([ExactText.id + ":duplicate" if d else None for d in dup], pa.string())
        ledger = pa.table({"id": docs.column("id"), "source": docs.column("source"), "loc": docs.column("loc"),
                           "exact_text.duplicate": pa.array(dup), "kept": keep, "reason": reason})
        rel_docs = f"_work/{self.stage}/documents/{unit.name}.parquet"
        rel_ledger = f"steps/{self.stage}/ledger/{unit.name}.parquet"
        for rel, table in ((rel_docs, docs.filter(keep).cast(DOCS_SCHEMA)), (rel_ledger, ledger)):
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, staging / rel)
        stats = Stats(input=docs.num_rows, kept=docs.num_rows - sum(dup))
        if sum(dup):
            stats.filter(ExactText.id + ":duplicate", sum(dup))
        return UnitResult(stats=stats, outputs=[rel_docs, rel_ledger], data={"docs": rel_docs, "ledger": rel_ledger})


@dataclass(frozen=True)
class ExactText:
    name: ClassVar[str] = "exact_text"
    version: ClassVar[int] = 1
    id: ClassVar[str] = "exact_text_v1"

    def stages(self, upstream: str) -> list[Stage]:
        def plan(ctx):
            prior = ctx.results[upstream]
            units = [Unit(i, f"unit-{i:06d}") for i in range(len(prior))]
            return StagePlan(units, _DropRepeats(str(ctx.out), tuple(r.data["docs"] for r in prior), "exact_text"))
        return [Stage("exact_text", 1, plan)]


def test_corpus_step_between_document_steps(tmp_path):
    for i in range(3):  # three identical files: the second and third are all duplicates
        write_corpus(tmp_path / "in" / f"f{i}.jsonl", bad_rows=False)
    steps = [{"name": "language", "languages": ["en"]}, ExactText(), {"name": "pii"}]
    m = run_curate([str(tmp_path / "in")], out=tmp_path / "out", steps=steps, workers=1)
    assert m["stages"] == ["curate_v1", "exact_text_v1", "curate_2_v1", "ledger_v1"]  # the ledger stage last
    assert [s["stage"] for s in m["steps"]] == ["curate", "exact_text", "curate_2"]
    c = m["counts"]
    english = 6
    assert c["balanced"] and c["kept"] == english and c["filtered"]["exact_text_v1:duplicate"] == 2 * english
    kept = pa.concat_tables([pq.read_table(tmp_path / "out" / d) for d in m["documents"]])
    assert kept.num_rows == english and any("<EMAIL>" in t for t in kept.column("text").to_pylist())
    assert all(d.startswith("documents/") for d in m["documents"])
    # the funnel replays the document stages and keeps the corpus step's recorded decisions
    again = recompute(tmp_path / "out", {})
    assert again["kept"] == english and again["unscored"] == 0
    loosened = recompute(tmp_path / "out", {("language", "languages"): []})
    assert loosened["unscored"] > 0  # documents that never reached the dedup stage are named, not guessed
