"""Parquet, Arrow IPC and ``datasets`` directory readers: Arrow record batches, never Python rows.

Parquet is split by row groups and read with column projection; Arrow IPC files are split by record
batch and memory-mapped when local; IPC streams and ``save_to_disk`` directories (whose ``*.arrow``
files are IPC streams, read in the order of ``state.json``'s ``_data_files``) are read whole, streamed
batch by batch. ``loc`` is the 1-based row in the file (in the whole dataset for a directory).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.base.accounting import Reject
from tokenmill.errors import InputError
from tokenmill.io.base import InputFile, RawBatch, WorkUnit
from tokenmill.io.formats import ARROW_FILE_MAGIC, local_path, open_raw, read_head

ARROW_ERRORS = (OSError, ValueError, pa.ArrowException)


@contextmanager
def _parquet(path: str) -> Iterator[pq.ParquetFile]:
    local = local_path(path)
    if local is not None:
        with pq.ParquetFile(local) as pf:
            yield pf
        return
    with open_raw(path) as fh, pq.ParquetFile(fh) as pf:
        yield pf


@contextmanager
def _ipc_source(path: str) -> Iterator[Any]:
    local = local_path(path)
    if local is not None:
        with pa.memory_map(local, "r") as src:
            yield src
        return
    with open_raw(path) as fh:
        yield fh


def _group(sizes: list[int], rows: list[int], unit_bytes: int) -> list[tuple[int, int, int]]:
    """(start, stop, first row) ranges of consecutive parts holding at least ``unit_bytes`` each."""
    ranges, start, acc, first, row = [], 0, 0, 1, 1
    for i, (size, n) in enumerate(zip(sizes, rows)):
        acc += size
        row += n
        if acc >= unit_bytes and i + 1 < len(sizes):
            ranges.append((start, i + 1, first))
            start, acc, first = i + 1, 0, row
    ranges.append((start, len(sizes), first))
    return ranges


def parquet_ranges(file: InputFile, *, unit_bytes: int) -> list[tuple[int, int, int]]:
    """(first row group, stop row group, first row) of each unit of a Parquet file."""
    try:
        with _parquet(file.path) as pf:
            md = pf.metadata
            groups = [md.row_group(i) for i in range(md.num_row_groups)]
    except ARROW_ERRORS:
        return [(0, -1, 1)]  # one unit; reading it reports the file as an "unreadable" reject
    sizes = [_stored_bytes(g) for g in groups]
    return _group(sizes, [g.num_rows for g in groups], unit_bytes)


def _stored_bytes(group: Any) -> int:
    return sum(group.column(c).total_compressed_size for c in range(group.num_columns))


def is_ipc_file(path: str) -> bool:
    return read_head(path, "", len(ARROW_FILE_MAGIC)) == ARROW_FILE_MAGIC


def arrow_ranges(file: InputFile, *, unit_bytes: int) -> list[tuple[int, int, int]]:
    """(first batch, stop batch, first row) of each unit of an Arrow IPC file; one unit for a stream."""
    if not is_ipc_file(file.path):
        return [(0, -1, 1)]
    try:
        with _ipc_source(file.path) as src:
            reader = pa.ipc.open_file(src)
            batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
            sizes, rows = [b.nbytes for b in batches], [b.num_rows for b in batches]
    except ARROW_ERRORS:
        return [(0, -1, 1)]  # one unit; reading it reports the file as an "unreadable" reject
    return _group(sizes, rows, unit_bytes)


def _project(batch: pa.RecordBatch, columns: list[str] | None) -> pa.RecordBatch:
    if columns is None:
        return batch
    return batch.select([c for c in columns if c in batch.schema.names])


def _slices(batch: pa.RecordBatch, batch_rows: int) -> Iterator[pa.RecordBatch]:
    step = max(1, batch_rows)
    for offset in range(0, batch.num_rows, step):
        yield batch.slice(offset, step)


def _raw_batch(source: str, batch: pa.RecordBatch, loc: int, nbytes: int) -> RawBatch:
    return RawBatch(source=source, locs=list(range(loc, loc + batch.num_rows)), table=batch, nbytes=nbytes)


def _unreadable(source: str, loc: int, exc: BaseException) -> RawBatch:
    detail = f"{source}: cannot read from row {loc} on: {exc}; is the file truncated or corrupt?"
    return RawBatch(source=source, locs=[], rows=[], rejects=[Reject(source, loc, "unreadable", detail)])


def read_parquet(unit: WorkUnit, *, batch_rows: int, columns: list[str] | None) -> Iterator[RawBatch]:
    try:
        yield from _read_parquet(unit, batch_rows=batch_rows, columns=columns)
    except ARROW_ERRORS as exc:  # a footer or schema that cannot be opened at all
        yield _unreadable(unit.file.rel, unit.first_loc, exc)


def _read_parquet(unit: WorkUnit, *, batch_rows: int, columns: list[str] | None) -> Iterator[RawBatch]:
    """One row group at a time: a damaged group costs its own rows (counted from the footer), not the file's."""
    f, loc = unit.file, unit.first_loc
    with _parquet(f.path) as pf:
        md = pf.metadata
        stop = md.num_row_groups if unit.stop < 0 else unit.stop
        names = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
        for group in range(unit.start, stop):
            meta = md.row_group(group)
            rows, size, read = max(1, meta.num_rows), _stored_bytes(meta), 0
            try:
                for batch in pf.iter_batches(batch_size=max(1, batch_rows), row_groups=[group], columns=names):
                    yield _raw_batch(f.rel, batch, loc + read, size * batch.num_rows // rows)
                    read += batch.num_rows
            except ARROW_ERRORS as exc:
                yield _unreadable_rows(f.rel, group, loc + read, meta.num_rows - read, exc)
            loc += meta.num_rows


def _unreadable_rows(source: str, group: int, loc: int, n: int, exc: BaseException) -> RawBatch:
    """One ``unreadable`` reject per row of a row group that could not be read (its size is in the footer)."""
    detail = (f"{source}: row group {group} cannot be read from row {loc} on ({exc}); its {n:,} remaining "
              "row(s) are counted as unreadable: is the file truncated or corrupt?")
    rejects = [Reject(source, loc + k, "unreadable", detail) for k in range(max(1, n))]
    return RawBatch(source=source, locs=[], rows=[], rejects=rejects)


def read_arrow(unit: WorkUnit, *, batch_rows: int, columns: list[str] | None) -> Iterator[RawBatch]:
    f, loc = unit.file, unit.first_loc
    try:
        with _ipc_source(f.path) as src:
            for batch in _ipc_batches(src, unit):
                for part in _slices(_project(batch, columns), batch_rows):
                    yield _raw_batch(f.rel, part, loc, part.nbytes)
                    loc += part.num_rows
    except ARROW_ERRORS as exc:
        yield _unreadable(f.rel, loc, exc)


def _ipc_batches(src: Any, unit: WorkUnit) -> Iterator[pa.RecordBatch]:
    if not is_ipc_file(unit.file.path):
        yield from pa.ipc.open_stream(src)
        return
    reader = pa.ipc.open_file(src)
    stop = reader.num_record_batches if unit.stop < 0 else unit.stop
    for i in range(unit.start, stop):
        yield reader.get_batch(i)


def hf_data_files(path: str) -> list[str]:
    """The ``*.arrow`` files of a ``save_to_disk`` directory, in dataset order."""
    with open_raw(posixpath.join(path, "state.json")) as fh:
        try:
            state = orjson.loads(fh.read())
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{path}/state.json is not valid JSON ({exc}); re-save the dataset") from exc
    names = [d["filename"] for d in state.get("_data_files", []) if isinstance(d, dict) and "filename" in d]
    if not names:
        raise InputError(f"{path}/state.json lists no _data_files; is this a datasets save_to_disk directory?")
    return [posixpath.join(path, n) for n in names]


def read_hf_dataset(unit: WorkUnit, *, batch_rows: int, columns: list[str] | None) -> Iterator[RawBatch]:
    f, loc = unit.file, unit.first_loc
    for data_file in hf_data_files(f.path):
        try:
            with _ipc_source(data_file) as src:
                for batch in pa.ipc.open_stream(src):
                    for part in _slices(_project(batch, columns), batch_rows):
                        yield _raw_batch(f.rel, part, loc, part.nbytes)
                        loc += part.num_rows
        except ARROW_ERRORS as exc:
            yield _unreadable(f.rel, loc, exc)
            return
