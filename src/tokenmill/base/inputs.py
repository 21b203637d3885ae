"""What the engine schedules and readers read: one resolved input file, and a slice of one.

``InputFile``  one resolved input (local path or fsspec URL) with its format and its path relative to the
               input root (used in stable record ids and in the rejects file).
``WorkUnit``   a slice of one file small enough to process in one worker: a byte range at line boundaries
               for JSONL, a range of row groups for Parquet, record batches for Arrow IPC, else the file.
"""

from __future__ import annotations

from dataclasses import dataclass


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
