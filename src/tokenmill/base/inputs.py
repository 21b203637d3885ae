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


# work units (tokenmill.io.units): their size when the user gives none, from the input's total bytes alone
DEFAULT_UNIT_BYTES = 64 << 20  # the largest unit the automatic rule picks
MIN_UNIT_BYTES = 4 << 20  # the smallest: below it a unit's fixed costs (files, marker, writers) dominate
TARGET_UNITS = 16  # units the rule aims at: several per worker on the cores of one machine
SPLITTABLE = ("jsonl", "parquet", "arrow")  # formats split into several units (uncompressed)


def auto_unit_size(total_bytes: int) -> int:
    """The automatic unit size of an input of ``total_bytes``: over 16, clamped to [4 MiB, 64 MiB]."""
    return int(min(DEFAULT_UNIT_BYTES, max(MIN_UNIT_BYTES, -(-total_bytes // TARGET_UNITS))))


def estimate_units(files: list[InputFile], *, unit_bytes: int | None) -> int:
    """About how many work units ``files`` make, from their names and sizes alone (a hint for starting workers)."""
    unit = auto_unit_size(sum(max(f.size, 0) for f in files)) if unit_bytes is None else unit_bytes
    return sum(max(1, -(-f.size // max(unit, 1))) if f.format in SPLITTABLE and not f.compression else 1
               for f in files)


# file names: a format from the extension (checked against the first bytes by tokenmill.io.formats)
COMPRESSION_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".jsonlines": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
    ".txt": "text",
    ".text": "text",
    ".md": "text",
    ".warc": "warc",
    ".wet": "wet",
}
HF_DATASET_MARKERS = ("state.json", "dataset_info.json")  # a directory `datasets` saved (one input, not a walk)


def split_name(path: str) -> tuple[str, str]:
    """(format from the extension or "", compression suffix's kind or "") of a file name."""
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
    stem, dot, ext = name.rpartition(".")
    compression = COMPRESSION_SUFFIXES.get(f".{ext}", "") if dot else ""
    if compression:
        stem, dot, ext = stem.rpartition(".")
    return (EXTENSIONS.get(f".{ext}", "") if dot else ""), compression
