"""Work units: slices of input files small enough for one worker, planned deterministically.

Uncompressed JSONL splits by byte range at line starts, Parquet by row groups, Arrow IPC files by record
batches; every other file (compressed, JSON arrays, text, WARC, IPC streams, ``datasets`` directories) is
one unit. Units are numbered 0..n-1 in file order, and the same files always give the same units.

Unit size, when none is given (:func:`auto_unit_bytes`): the input's total bytes over
:data:`TARGET_UNITS`, between :data:`MIN_UNIT_BYTES` and :data:`DEFAULT_UNIT_BYTES`. It is derived from the
input alone, never from the number of workers, so the units -- and with them every output byte -- are the
same at 1 worker and at 64. A 50 MB JSONL file gets 12 units of 4 MiB (6 per worker at 2 workers) instead
of one; anything under 4 MiB stays one unit per file as before; from 1 GiB up units are 64 MiB. A worker's
peak memory follows its unit, not the file.
"""

from __future__ import annotations

from tokenmill.base.inputs import DEFAULT_UNIT_BYTES, MIN_UNIT_BYTES, TARGET_UNITS, auto_unit_size  # noqa: F401
from tokenmill.errors import ConfigError
from tokenmill.io.base import InputFile, WorkUnit
from tokenmill.io.columnar import arrow_ranges, parquet_ranges
from tokenmill.io.jsonfmt import line_ranges


def auto_unit_bytes(files: list[InputFile]) -> int:
    """The unit size for ``files`` when the user gave none: total bytes / 16, clamped to [4 MiB, 64 MiB]."""
    return auto_unit_size(sum(max(f.size, 0) for f in files))


def plan_units(files: list[InputFile], *, unit_bytes: int | None = None) -> list[WorkUnit]:
    """The work units of ``files``, each about ``unit_bytes`` of input where the format can be split.

    ``unit_bytes=None`` picks the size from the inputs' total size (:func:`auto_unit_bytes`).
    """
    if unit_bytes is None:
        unit_bytes = auto_unit_bytes(files)
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
