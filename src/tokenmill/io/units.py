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

Small files share units: consecutive files each under 1/256 of the unit size are packed into one unit,
up to the unit size and 1,024 files, so 10,000 files of a few KB make about as many units as the same records
in one file (their own units cost a worker task, a marker and several files each). A packed unit reads its
files whole, one after the other, each with its own name and line numbers (:meth:`WorkUnit.pieces`).
"""

from __future__ import annotations

from tokenmill.base.inputs import (  # noqa: F401
    DEFAULT_UNIT_BYTES,
    FILES_PER_UNIT,
    MIN_UNIT_BYTES,
    TARGET_UNITS,
    auto_unit_size,
    is_small,
)
from tokenmill.errors import ConfigError
from tokenmill.io.base import InputFile, WorkUnit
from tokenmill.io.columnar import arrow_ranges, parquet_ranges
from tokenmill.io.jsonfmt import line_ranges


def auto_unit_bytes(files: list[InputFile]) -> int:
    """The unit size for ``files`` when the user gave none: total bytes / 16, clamped to [4 MiB, 64 MiB]."""
    return auto_unit_size(sum(max(f.size, 0) for f in files))


def plan_units(files: list[InputFile], *, unit_bytes: int | None = None, split: bool = True,
               pack: bool = True) -> list[WorkUnit]:
    """The work units of ``files``, each about ``unit_bytes`` of input where the format can be split, small
    files packed together (module docstring).

    ``unit_bytes=None`` picks the size from the inputs' total size (:func:`auto_unit_bytes`). ``split=False``
    reads every file from its start, whole (``--limit``: the first records of every input). ``pack=False``
    gives every file units of its own.
    """
    if unit_bytes is None:
        unit_bytes = auto_unit_bytes(files)
    if unit_bytes <= 0:
        raise ConfigError(f"unit_bytes must be a positive number of bytes, got {unit_bytes}")
    units: list[WorkUnit] = []
    for group in _groups(files, unit_bytes) if pack else [[f] for f in files]:
        if len(group) > 1:
            units.append(WorkUnit(index=len(units), file=group[0], packed=tuple(group[1:])))
            continue
        for start, stop, first_loc in (_ranges(group[0], unit_bytes) if split else [(0, -1, 1)]):
            units.append(WorkUnit(index=len(units), file=group[0], start=start, stop=stop, first_loc=first_loc))
    return units


def _groups(files: list[InputFile], unit_bytes: int) -> list[list[InputFile]]:
    """``files`` in order, in runs: each small file joins the run before it while that run is of small files
    and stays within ``unit_bytes`` and FILES_PER_UNIT files; every other file is a run of its own."""
    groups: list[list[InputFile]] = []
    room = -1  # bytes left in the last run when it is a run of small files, else -1
    for f in files:
        size = max(f.size, 0)
        if is_small(f, unit_bytes) and groups and len(groups[-1]) < FILES_PER_UNIT and size <= room:
            groups[-1].append(f)
            room -= size
            continue
        groups.append([f])
        room = unit_bytes - size if is_small(f, unit_bytes) else -1
    return groups


def _ranges(file: InputFile, unit_bytes: int) -> list[tuple[int, int, int]]:
    if file.format == "jsonl" and not file.compression:
        return line_ranges(file, unit_bytes=unit_bytes)
    if file.format == "parquet":
        return parquet_ranges(file, unit_bytes=unit_bytes)
    if file.format == "arrow":
        return arrow_ranges(file, unit_bytes=unit_bytes)
    return [(0, -1, 1)]
