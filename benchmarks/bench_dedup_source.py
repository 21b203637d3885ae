"""The documents stage the dedup benchmark starts from: one unit per raw JSONL file of ``{"id", "text"}``,
read with Arrow's JSON reader and written as ``Document`` Parquet (the curation framework's own source
stage does the same for every input format)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq

from tokenmill.engine import Stage, StagePlan, Unit, UnitResult
from tokenmill.records import DOCUMENT
from tokenmill.report.accounting import Stats


@dataclass(frozen=True)
class JsonlSource:
    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        raw = pj.read_json(unit.payload)
        n = raw.num_rows
        nulls = pa.nulls(n, pa.string())
        table = pa.table({"id": raw.column("id"), "text": raw.column("text").cast(pa.large_string()),
                          "source": pa.array([Path(unit.payload).name] * n), "url": nulls, "license": nulls,
                          "meta": nulls}, schema=DOCUMENT)
        docs, ledger = f"source/docs/{unit.name}.parquet", f"source/ledger/{unit.name}.parquet"
        for d in ("source/docs", "source/ledger"):
            (staging / d).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, staging / docs)
        pq.write_table(pa.table({"id": table.column("id"), "source": table.column("source"),
                                 "kept": pa.array([True] * n), "reason": nulls}), staging / ledger)
        return UnitResult(stats=Stats(input=n, kept=n), outputs=[docs, ledger],
                          data={"docs": docs, "ledger": ledger, "unit": unit.name})


def jsonl_source_stage(files: list[str]) -> Stage:
    def plan(ctx):
        return StagePlan([Unit(i, f"unit-{i:06d}", payload=f) for i, f in enumerate(files)], JsonlSource(),
                         {"files": files})

    return Stage("source", 1, plan)


def xxhash64_str(text: str) -> int:
    """datatrove's default shingle hash (``xxhash.xxh64_intdigest``) for the xxhash release installed here,
    which takes bytes only: the text is UTF-8 encoded first (datatrove passes ``str``)."""
    import xxhash

    return xxhash.xxh64_intdigest(text.encode("utf-8"))
