"""What readers produce (``InputFile`` and ``WorkUnit`` live in :mod:`tokenmill.base.inputs`).

``RawBatch``   what a reader yields for one unit: either ``rows`` (dicts, for JSON-like and text formats) or
               ``table`` (an Arrow record batch, for columnar formats), with the 1-based line/row number of
               each record in ``locs`` and the records it could not read in ``rejects``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tokenmill.base.accounting import Reject
from tokenmill.base.inputs import InputFile, WorkUnit

__all__ = ["FORMATS", "TEXT_MODES", "InputFile", "RawBatch", "WorkUnit"]

# Formats the readers understand. "text" comes in three document modes (see TEXT_MODES).
FORMATS = ("jsonl", "json", "parquet", "arrow", "text", "hf_dataset", "warc", "wet")
TEXT_MODES = ("auto", "file", "line", "paragraph")


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
