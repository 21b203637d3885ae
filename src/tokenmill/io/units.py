"""Work units: slices of input files small enough for one worker, planned deterministically.

Uncompressed JSONL splits by byte range at line starts, Parquet by row groups, Arrow IPC files by record
batches; every other file (compressed, JSON arrays, text, WARC, IPC streams, ``datasets`` directories) is
one unit. Units are numbered 0..n-1 in file order, and the same files always give the same units.
"""

from __future__ import annotations

from tokenmill.errors import ConfigError
from tokenmill.io.base import InputFile, WorkUnit
from tokenmill.io.columnar import arrow_ranges, parquet_ranges
from tokenmill.io.jsonfmt import line_ranges

DEFAULT_UNIT_BYTES = 64 << 20


def plan_units(files: list[InputFile], *, unit_bytes: int = DEFAULT_UNIT_BYTES) -> list[WorkUnit]:
    """The work units of ``files``, each about ``unit_bytes`` of input where the format can be split."""
    if unit_bytes <= 0:
        raise ConfigError(f"unit_bytes must be a positive number of bytes, got {unit_bytes}")
    units: list[WorkUnit] = []
    for f in files:
        for start, stop, first_loc in _ranges(f, unit_bytes):
            units.append(WorkUnit(index=len(units), file=f, start=start, stop=stop, first_loc=first_loc))
    return units


def _ranges(file: InputFile, unit_bytes: int) -> list[tuple[int, int, int]]:
    if file.format == "jsonl" and not file.compression:
        return line_ranges(file, unit_bytes=unit_bytes)
    if file.format == "parquet":
        return parquet_ranges(file, unit_bytes=unit_bytes)
    if file.format == "arrow":
        return arrow_ranges(file, unit_bytes=unit_bytes)
    return [(0, -1, 1)]
