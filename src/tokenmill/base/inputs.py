"""What the engine schedules and readers read: one resolved input file, and a slice of one.

``InputFile``  one resolved input (local path or fsspec URL) with its format and its path relative to the
               input root (used in stable record ids and in the rejects file).
``WorkUnit``   a slice of one file small enough to process in one worker: a byte range at line boundaries
               for JSONL, a range of row groups for Parquet, record batches for Arrow IPC, else the file;
               or several small files whole, read one after the other (see :func:`tokenmill.io.units.plan_units`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


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
    packed: tuple[InputFile, ...] = ()  # further small files read whole after ``file``, in input order

    @property
    def name(self) -> str:
        return f"unit-{self.index:06d}"

    @property
    def files(self) -> tuple[InputFile, ...]:
        """Every input file the unit reads, in order (one, unless small files were packed into it)."""
        return (self.file, *self.packed)

    @property
    def size(self) -> int:
        """Bytes of input the unit reads (its byte range of a JSONL file, else its files' sizes)."""
        if self.stop >= 0 and self.file.format == "jsonl" and not self.file.compression:
            return self.stop - self.start
        return sum(max(f.size, 0) for f in self.files)

    def pieces(self) -> list[WorkUnit]:
        """The unit as single-file units of the same index and name, one per file: what a reader reads, so that
        each record keeps its own file and line, and ``--limit`` counts from each file's first record."""
        if not self.packed:
            return [self]
        return [replace(self, packed=()), *(WorkUnit(index=self.index, file=f) for f in self.packed)]


# work units (tokenmill.io.units): their size when the user gives none, from the input's total bytes alone
DEFAULT_UNIT_BYTES = 64 << 20  # the largest unit the automatic rule picks
MIN_UNIT_BYTES = 4 << 20  # the smallest: below it a unit's fixed costs (files, marker, writers) dominate
TARGET_UNITS = 16  # units the rule aims at: several per worker on the cores of one machine
SPLITTABLE = ("jsonl", "parquet", "arrow")  # formats split into several units (uncompressed)
# small files share units: a file under 1/SMALL_FILE_PARTS of the unit size (16 KiB at the 4 MiB minimum) is
# packed with the small files beside it, up to the unit size and FILES_PER_UNIT files. Its own unit would cost
# more than reading it (a worker task, a marker, a ledger part, a rejects file); files of ordinary size keep
# their own units, and with them their output names.
SMALL_FILE_PARTS = 256
FILES_PER_UNIT = 1024


def auto_unit_size(total_bytes: int) -> int:
    """The automatic unit size of an input of ``total_bytes``: over 16, clamped to [4 MiB, 64 MiB]."""
    return int(min(DEFAULT_UNIT_BYTES, max(MIN_UNIT_BYTES, -(-total_bytes // TARGET_UNITS))))


def is_small(file: InputFile, unit_bytes: int) -> bool:
    """Whether ``file`` is packed with its small neighbours rather than given a unit of its own."""
    return file.format != "hf_dataset" and max(file.size, 0) * SMALL_FILE_PARTS < unit_bytes


def estimate_units(files: list[InputFile], *, unit_bytes: int | None) -> int:
    """About how many work units ``files`` make, from their names and sizes alone (a hint for starting workers)."""
    unit = max(auto_unit_size(sum(max(f.size, 0) for f in files)) if unit_bytes is None else unit_bytes, 1)
    small = [f for f in files if is_small(f, unit)]
    packed = max(-(-sum(max(f.size, 0) for f in small) // unit), -(-len(small) // FILES_PER_UNIT))
    return packed + sum(max(1, -(-f.size // unit)) if f.format in SPLITTABLE and not f.compression else 1
                        for f in files if not is_small(f, unit))


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
