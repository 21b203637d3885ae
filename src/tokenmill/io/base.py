"""What readers produce and what the engine schedules.

``InputFile``  one resolved input (local path or fsspec URL) with its format and its path relative to the
               input root (used in stable record ids and in the rejects file).
``WorkUnit``   a slice of one file small enough to process in one worker: a byte range at line boundaries
               for JSONL, a range of row groups for Parquet, record batches for Arrow IPC, else the file.
``RawBatch``   what a reader yields for one unit: either ``rows`` (dicts, for JSON-like and text formats) or
               ``table`` (an Arrow record batch, for columnar formats), with the 1-based line/row number of
               each record in ``locs`` and the records it could not read in ``rejects``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tokenmill.report.accounting import Reject

# Formats the readers understand. "text" comes in three document modes (see TEXT_MODES).
FORMATS = ("jsonl", "json", "parquet", "arrow", "text", "hf_dataset", "warc", "wet")
TEXT_MODES = ("auto", "file", "line", "paragraph")


@dataclass(frozen=True)
class InputFile:
    path: str  # local path or fsspec URL, as given to open()
    rel: str  # path relative to the input root, '/'-separated
    format: str  # one of FORMATS
    size: int  # bytes on disk (compressed size for .gz/.zst); 0 for directories
    compression: str = ""  # "", "gzip" or "zstd"


@dataclass(frozen=True)
class WorkUnit:
    index: int  # position in the run's unit list; fixes output names and order
    file: InputFile
    start: int = 0  # byte offset (jsonl) or first row group / record batch (parquet, arrow)
    stop: int = -1  # exclusive end in the same unit as start; -1 = end of file
    first_loc: int = 1  # 1-based line or row number of the unit's first record

    @property
    def name(self) -> str:
        return f"unit-{self.index:06d}"


@dataclass
class RawBatch:
    source: str  # InputFile.rel
    locs: list[int]  # 1-based line/row of each record (same length as rows or table)
    rows: list[dict[str, Any]] | None = None
    table: pa.RecordBatch | None = None
    rejects: list[Reject] = field(default_factory=list)
    nbytes: int = 0  # input bytes this batch consumed (for progress and accounting)
    # input items that are not records and so neither kept nor rejected, by reason (e.g. WARC responses
    # that are not HTML or not HTTP 200: "warc_not_html", "warc_http_status"); informational only
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        if self.rows is not None:
            return len(self.rows)
        return 0 if self.table is None else self.table.num_rows

    def to_rows(self) -> list[dict[str, Any]]:
        if self.rows is not None:
            return self.rows
        return [] if self.table is None else self.table.to_pylist()
