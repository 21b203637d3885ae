"""Read one work unit as RawBatch objects, and sample the first records of a file for the router."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from tokenmill.base.accounting import Reject
from tokenmill.errors import InputError
from tokenmill.io import jsonfmt
from tokenmill.io.base import FORMATS, InputFile, RawBatch, WorkUnit
from tokenmill.io.columnar import read_arrow, read_hf_dataset, read_parquet
from tokenmill.io.formats import open_raw
from tokenmill.io.jsonfmt import parse_line, read_json, read_jsonl
from tokenmill.io.paths import check_text_mode
from tokenmill.io.rows import RowBatcher
from tokenmill.io.text import read_text
from tokenmill.io.warc import read_warc

READERS: dict[str, Callable[..., Iterator[RawBatch]]] = {
    "jsonl": read_jsonl,
    "json": read_json,
    "parquet": read_parquet,
    "arrow": read_arrow,
    "hf_dataset": read_hf_dataset,
    "warc": read_warc,
    "wet": read_warc,
}
SAMPLE_TEXT_BYTES = 1 << 20  # file-mode text samples read at most this much
SPREAD_MIN_BYTES = 256 << 10  # uncompressed JSONL at least this big is sampled across the file, not its head
SPREAD_POINTS = 4


def read_unit(
    unit: WorkUnit,
    *,
    batch_rows: int = 4096,
    text_mode: str = "auto",
    columns: list[str] | None = None,
    limit: int | None = None,
) -> Iterator[RawBatch]:
    """Stream the records of ``unit`` in batches of at most ``batch_rows`` records (rows plus rejects).

    ``columns`` keeps only those keys or columns (missing ones are left out, not invented). A unit of several
    packed files reads them one after the other, each batch of one file (``RawBatch.source``); ``limit``
    keeps the first records of each file (``--limit``).
    """
    check_text_mode(text_mode)
    if not unit.packed:
        return take_records(_read_file(unit, batch_rows, text_mode, columns), limit)
    return _read_pieces(unit, batch_rows, text_mode, columns, limit)


def _read_pieces(unit: WorkUnit, batch_rows: int, text_mode: str, columns: list[str] | None,
                 limit: int | None) -> Iterator[RawBatch]:
    for piece in unit.pieces():
        batches = _read_file(piece, batch_rows, text_mode, columns)
        try:
            yield from take_records(batches, limit)
        finally:  # a file cut at --limit is closed before the next one opens
            close = getattr(batches, "close", None)
            if close is not None:
                close()


def take_records(batches: Iterator[RawBatch], limit: int | None) -> Iterator[RawBatch]:
    """The reader's batches of one file cut after the first ``limit`` records (rows and rejects, in file order)."""
    if limit is None:
        yield from batches
        return
    left = limit
    for raw in batches:
        if left <= 0:
            return
        size = len(raw) + len(raw.rejects)
        if size <= left:
            left -= size
            yield raw
            continue
        yield _first(raw, left)
        return


def _first(raw: RawBatch, k: int) -> RawBatch:
    """The first ``k`` records of one batch: rows and rejects up to the k-th location."""
    cutoff = sorted([*raw.locs, *(r.loc for r in raw.rejects)])[k - 1]
    m = sum(1 for loc in raw.locs if loc <= cutoff)
    size = len(raw) + len(raw.rejects)
    return replace(
        raw, locs=raw.locs[:m], rows=None if raw.rows is None else raw.rows[:m],
        table=None if raw.table is None else raw.table.slice(0, m),
        rejects=[r for r in raw.rejects if r.loc <= cutoff], nbytes=raw.nbytes * k // max(size, 1),
    )


def _read_file(unit: WorkUnit, batch_rows: int, text_mode: str, columns: list[str] | None) -> Iterator[RawBatch]:
    """The batches of a single-file unit, by its format's reader."""
    fmt = unit.file.format
    if unit.file.size == 0 and unit.start == 0 and fmt != "hf_dataset":
        return _empty_file(unit.file)
    if fmt == "text":
        return read_text(unit, batch_rows=batch_rows, text_mode=text_mode, columns=columns)
    if fmt not in READERS:
        raise InputError(f"{unit.file.rel}: no reader for format {fmt!r} (known: {', '.join(FORMATS)})")
    return READERS[fmt](unit, batch_rows=batch_rows, columns=columns)


def _empty_file(file: InputFile) -> Iterator[RawBatch]:
    """An empty file is one rejected input (``empty_file``), counted, so a directory run goes on without it."""
    why = f"{file.rel}: the file is empty (0 bytes); fill it or leave it out of the inputs"
    yield RawBatch(file.rel, [], rejects=[Reject(file.rel, 0, "empty_file", why)])


def sample_records(
    file: InputFile, *, n: int = 200, text_mode: str = "auto"
) -> tuple[list[dict[str, Any]], list[int], list[Reject]]:
    """``n`` readable records of ``file`` as dicts, their locs, and the rejects met on the way.

    The head of the file; for uncompressed JSONL of ``SPREAD_MIN_BYTES`` or more, half the sample comes from
    ``SPREAD_POINTS`` offsets spread across the file (locs 0: line numbers unknown there), so data that
    changes kind after its first records is seen. Reads about ``n`` records, never the whole file.
    """
    check_text_mode(text_mode)
    if file.format == "jsonl" and not file.compression and file.size >= SPREAD_MIN_BYTES and n >= 2 * SPREAD_POINTS:
        rows, locs, rejects = _head(file, n - n // 2, text_mode)
        spread = _spread_jsonl(file, n // 2)
        return rows + spread.rows, locs + spread.locs, rejects + spread.rejects
    return _head(file, n, text_mode)


def _spread_jsonl(file: InputFile, n: int):
    out = RowBatcher(file.rel, batch_rows=n)
    per = max(1, n // SPREAD_POINTS)
    with open_raw(file.path) as fh:
        for k in range(1, SPREAD_POINTS + 1):
            fh.seek(file.size * k // (SPREAD_POINTS + 1))
            fh.readline(jsonfmt.MAX_RECORD_BYTES)  # the rest of a line cut by the seek
            for _ in range(per):
                line = fh.readline(jsonfmt.MAX_RECORD_BYTES)
                if not line:
                    break
                parse_line(line, 0, out)
    return out


@contextmanager
def _closed_after(batches: Iterator[RawBatch]) -> Iterator[None]:
    """Close ``batches`` on the way out (a reader's generator stopped early releases its file at once)."""
    try:
        yield
    finally:
        if isinstance(batches, Generator):
            batches.close()


def _head(file: InputFile, n: int, text_mode: str) -> tuple[list[dict[str, Any]], list[int], list[Reject]]:
    unit = WorkUnit(index=0, file=file)
    if file.format == "text":
        batches = read_text(unit, batch_rows=n, text_mode=text_mode, columns=None, limit_bytes=SAMPLE_TEXT_BYTES)
    elif file.format == "json":  # the first elements only: scanned, never the whole array parsed
        batches = read_json(unit, batch_rows=n, columns=None, whole=False)
    else:
        batches = _read_file(unit, n, "auto", None)
    rows: list[dict[str, Any]] = []
    locs: list[int] = []
    rejects: list[Reject] = []
    with _closed_after(batches):
        for batch in batches:
            rows.extend(batch.to_rows())
            locs.extend(batch.locs)
            rejects.extend(batch.rejects)
            if len(rows) >= n or len(rejects) >= n:
                break
    return rows[:n], locs[:n], rejects
