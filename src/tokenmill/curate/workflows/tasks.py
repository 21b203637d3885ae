"""The per-unit tasks of curation's map stages (documents stages, in the registry's sense).

``ReadTask`` reads one input work unit exactly as ``tokenmill pretrain`` does (same readers, same
``Document`` mapping, same rejects), runs the cascade and writes the unit's kept documents and its ledger
part. ``DocsTask`` does the same over the documents file an upstream stage wrote for that unit. Both
return a :class:`~tokenmill.engine.stage.UnitResult` whose ``data`` holds ``docs`` and ``ledger`` (paths
relative to the output directory) and ``samples`` (a few removed documents per reason, truncated, for
the report).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill._arrow import skip_pandas_probe
from tokenmill.base import segments
from tokenmill.engine.outputs import Documents, as_data
from tokenmill.engine.stage import Unit, UnitResult
from tokenmill.io import read_unit
from tokenmill.io.documents import to_documents
from tokenmill.records import DOCUMENT
from tokenmill.report.accounting import Stats
from tokenmill.report.rejects import RejectSink
from tokenmill.steps.cascade import Cascade, CascadeResult
from tokenmill.steps.ledger import concat_ledger, kept_locs, ledger_part, write_table

DOCS_SCHEMA = DOCUMENT.append(pa.field("loc", pa.int64()))  # the documents files: provenance travels along
# a documents file's row groups: about this many bytes of documents each (Arrow's size, mostly the text), so a
# worker holds, and a reader reads, that much of a unit at a time; at the automatic unit size (input / 16,
# 4 to 64 MiB) a unit from an input under about 100 MB is one row group
ROW_GROUP_BYTES = 8 << 20
SAMPLES_PER_REASON = 3
SAMPLE_CHARS = 600
# documents scored together: the word-level steps split each distinct whitespace chunk of a batch once, and
# four read batches of web text hold about 1.8 times the distinct chunks of one, not four times (the first
# pass's CPU: BENCHMARKS.md). The documents file keeps the row chunks of the read batches
SCORE_ROWS = 4096
# ... and at most about this many bytes of them: a batch is joined, copied and filtered while scored, so 4,096
# documents of 5 KB held some 80 MB of Arrow memory at once (4,096 of 100 KB, 1.6 GB); which batches are joined
# changes no byte of the output (tests/curate/test_score_rows.py)
SCORE_BYTES = 8 << 20


class _Writer:
    """Accumulates a unit's documents and ledger batches; writes two Parquet files.

    The documents go out a row group at a time: once the batches held reach :data:`ROW_GROUP_BYTES`, they are
    written as one row group and let go, so a worker holds about that much of a unit's documents, not the
    whole unit (up to 64 MiB of text at the automatic unit size), and a reader of the file reads that much at
    a time. A unit whose kept documents stay under it is one row group written in one call, as it always was:
    the same bytes."""

    def __init__(self, staging: Path, docs_rel: str, ledger_rel: str):
        self.staging, self.docs_rel, self.ledger_rel = staging, docs_rel, ledger_rel
        self.docs: list[pa.RecordBatch] = []
        self.held = 0  # bytes of the batches in self.docs
        self.rows = 0  # documents written in earlier row groups
        self.parquet: pq.ParquetWriter | None = None  # open once the first row group is written
        self.ledger: list[pa.RecordBatch] = []
        self.samples: dict[str, list[dict]] = {}

    def add(self, result: CascadeResult, docs_in: pa.RecordBatch, blocks: list[int] | None = None) -> None:
        """``blocks``: the rows of each read batch ``docs_in`` was joined from; the kept documents of each stay
        one row chunk of the documents file, as when every read batch was scored on its own."""
        kept = result.kept
        if blocks is None or len(blocks) == 1:
            if kept.num_rows:
                self._hold(kept)
        else:
            keep = np.asarray(result.ledger.column("kept"), dtype=bool)
            block_of = np.repeat(np.arange(len(blocks)), blocks)
            start = 0
            for n in np.bincount(block_of[keep], minlength=len(blocks)).tolist():
                if n:
                    self._hold(kept.slice(start, n))
                start += n
        self.ledger.append(result.ledger)
        self._sample(result.ledger, docs_in)

    def _hold(self, batch: pa.RecordBatch) -> None:
        self.docs.append(batch)
        self.held += batch.nbytes
        if self.held >= ROW_GROUP_BYTES:
            self._row_group()

    def _row_group(self) -> None:
        """Write the batches held as one row group of the documents file, and let them go."""
        if self.parquet is None:
            path = self.staging / self.docs_rel
            path.parent.mkdir(parents=True, exist_ok=True)
            self.parquet = pq.ParquetWriter(path, DOCS_SCHEMA, compression="zstd")
        table = pa.Table.from_batches(self.docs, schema=DOCS_SCHEMA)
        self.parquet.write_table(table, row_group_size=table.num_rows)
        self.rows += table.num_rows
        self.docs, self.held = [], 0

    def _sample(self, ledger: pa.RecordBatch, docs_in: pa.RecordBatch) -> None:
        reasons = ledger.column("reason").to_pylist()
        for i, r in enumerate(reasons):
            if r is None or len(self.samples.setdefault(r, [])) >= SAMPLES_PER_REASON:
                continue
            text = docs_in.column("text")[i].as_py()
            self.samples[r].append({"id": ledger.column("id")[i].as_py(), "source": ledger.column("source")[i].as_py(),
                                    "loc": ledger.column("loc")[i].as_py(), "text": text[:SAMPLE_CHARS],
                                    "truncated": len(text) > SAMPLE_CHARS})

    def close(self) -> Documents:
        if self.parquet is not None:  # a unit larger than one row group
            if self.docs:
                self._row_group()
            self.parquet.close()
            rows = self.rows
        else:
            docs = pa.Table.from_batches(self.docs, schema=DOCS_SCHEMA) if self.docs else DOCS_SCHEMA.empty_table()
            write_table(self.staging / self.docs_rel, docs)
            rows = docs.num_rows
        ledger = concat_ledger(self.ledger)
        if ledger is not None:
            write_table(self.staging / self.ledger_rel, ledger)
        sized = docs_size(self.staging, self.docs_rel, rows)
        return Documents(self.docs_rel, self.ledger_rel if ledger is not None else None, samples=self.samples,
                         rows=sized["rows"], size=sized["size"])


def docs_size(staging: Path, rel: str, rows: int) -> dict[str, int]:
    """The ``rows`` and ``size`` of a documents output written to ``staging/rel`` (``engine/outputs.py``)."""
    return {"rows": int(rows), "size": (staging / rel).stat().st_size}


def _with_loc(docs: pa.RecordBatch, locs: np.ndarray) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(list(docs.columns) + [pa.array(locs, pa.int64())], schema=DOCS_SCHEMA)


def _as_docs(batch: pa.RecordBatch) -> pa.RecordBatch:
    """An upstream documents batch in ``DOCS_SCHEMA`` (a stage that wrote no ``loc`` or ``meta`` gets nulls)."""
    names = batch.schema.names
    cols = [batch.column(f.name).cast(f.type) if f.name in names else pa.nulls(batch.num_rows, f.type)
            for f in DOCS_SCHEMA]
    return pa.RecordBatch.from_arrays(cols, schema=DOCS_SCHEMA)


def _score_all(cascade: Cascade, batches: Iterator[pa.RecordBatch], writer: _Writer, stats: Stats, seconds: Counter,
               score_rows: int) -> None:
    """Run ``cascade`` over ``batches`` joined into batches of at least ``score_rows`` documents or
    :data:`SCORE_BYTES` bytes, whichever comes first (the last one smaller), into ``writer``."""
    pending: list[pa.RecordBatch] = []

    def score() -> None:
        blocks = [b.num_rows for b in pending]
        docs = pending[0] if len(pending) == 1 else pa.concat_batches(pending)
        pending.clear()  # joined: the read batches are let go before scoring, not held beside their copy
        result = cascade(docs, docs.column("loc").to_numpy())
        seconds.update(result.seconds)
        writer.add(result, docs, blocks=blocks)
        _count(stats, result)

    for batch in batches:
        pending.append(batch)
        if sum(b.num_rows for b in pending) >= score_rows or sum(b.nbytes for b in pending) >= SCORE_BYTES:
            score()
    if pending:
        score()


def _count(stats: Stats, result: CascadeResult) -> None:
    stats.kept += result.kept.num_rows
    for reason, n in result.filtered.items():
        stats.filter(reason, n)
    stats.extra.update(result.counts)


@dataclass(frozen=True)
class ReadTask:
    """Input work unit -> documents + ledger part. Picklable; ``setup()`` loads the steps' models once."""
    output: ClassVar[type] = Documents  # what its units hand on, checked at commit (engine/outputs.py)

    cascade: Cascade
    schemas: dict[str, dict]
    stage: str
    docs_dir: str  # relative to the output directory: "documents" for the last stage
    text_mode: str = "auto"
    batch_rows: int = 1024
    limit: int | None = None  # the first records of every input only (a trial run)
    score_rows: int | None = None  # read batches are joined until they hold this many (None: SCORE_ROWS)

    @property
    def segments(self) -> tuple[str, ...]:  # an intermediate copy of the documents (base/segments.py)
        return (self.docs_dir,) if self.docs_dir.startswith("_work/") else ()

    def setup(self) -> None:
        skip_pandas_probe()  # a pool worker never needs pyarrow to import pandas
        self.cascade.setup()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        work, stats, seconds = unit.payload, Stats(), Counter()
        writer = _Writer(staging, f"{self.docs_dir}/{unit.name}.parquet", ledger_part(self.stage, unit.name))
        sink = RejectSink(staging, work)

        def batches() -> Iterator[pa.RecordBatch]:
            for raw in read_unit(work, batch_rows=self.batch_rows, text_mode=self.text_mode, limit=self.limit):
                stats.input += len(raw) + len(raw.rejects)
                stats.bytes_in += raw.nbytes
                stats.extra.update({f"skipped:{k}": v for k, v in raw.skipped.items()})
                sink.add(raw.rejects, stats)
                docs, rejects = to_documents(raw, self.schemas.get(raw.source, {}))
                sink.add(rejects, stats)
                if docs.num_rows:
                    yield _with_loc(docs, kept_locs(raw, rejects))

        _score_all(self.cascade, batches(), writer, stats, seconds, self.score_rows or SCORE_ROWS)
        sink.close()
        written = writer.close()
        return UnitResult(stats=stats, outputs=[written.docs] + ([written.ledger] if written.ledger else []),
                          data=as_data(written), step_seconds=seconds)


@dataclass(frozen=True)
class DocsTask:
    """An upstream stage's documents for one unit -> documents + ledger part of this stage."""
    output: ClassVar[type] = Documents  # what its units hand on, checked at commit (engine/outputs.py)

    cascade: Cascade
    stage: str
    docs_dir: str
    out: str  # the run's output directory (the upstream files are read from there)
    batch_rows: int = 1024
    score_rows: int | None = None
    sources: dict[int, str] = field(default_factory=dict)  # unit index -> upstream docs file (relative)

    @property
    def segments(self) -> tuple[str, ...]:  # an intermediate copy of the documents (base/segments.py)
        return (self.docs_dir,) if self.docs_dir.startswith("_work/") else ()

    def setup(self) -> None:
        skip_pandas_probe()  # a pool worker never needs pyarrow to import pandas
        self.cascade.setup()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        stats, seconds = Stats(), Counter()
        writer = _Writer(staging, f"{self.docs_dir}/{unit.name}.parquet", ledger_part(self.stage, unit.name))
        source = Path(self.out) / unit.payload

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in pq.ParquetFile(segments.arrow_source(source)).iter_batches(batch_size=self.batch_rows):
                stats.input += batch.num_rows
                yield _as_docs(batch)

        _score_all(self.cascade, batches(), writer, stats, seconds, self.score_rows or SCORE_ROWS)
        written = writer.close()
        return UnitResult(stats=stats, outputs=[written.docs] + ([written.ledger] if written.ledger else []),
                          data=as_data(written), step_seconds=seconds)
