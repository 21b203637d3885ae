"""JSON Lines and JSON array readers.

JSONL is read line by line (``orjson``); an uncompressed file is split into byte ranges that start at line
starts, found in one streaming pass that also counts lines, so each range knows its first line number.
A JSON array is split element by element (``jsonscan``) and each element parsed alone: memory stays at
one element whatever the file size, and one damaged element loses only itself. An array of at most
:data:`WHOLE_ARRAY_BYTES` is first parsed whole (one ``orjson`` call, a third of the scan's time): when that
succeeds and no element nests too deep, every element is what parsing it alone would give, so the rows are the
same; else the scan reads it. Bad lines and elements become rejects (``invalid_utf8``, ``malformed_json``,
``not_an_object``); blank lines are not records.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import IO

import orjson

from tokenmill.errors import InputError
from tokenmill.io.base import InputFile, RawBatch, WorkUnit
from tokenmill.io.formats import READ_ERRORS, Stream, decompressed, open_raw
from tokenmill.io.jsonscan import MAX_DEPTH, MAX_RECORD_BYTES, ArrayScanner, Readable, nesting_depth, too_deep
from tokenmill.io.rows import RowBatcher

SCAN_CHUNK = 1 << 20
BOM = b"\xef\xbb\xbf"
WHOLE_ARRAY_BYTES = 8 << 20  # parsed whole: its rows held at once (tens of MB of Python objects at most)


def line_ranges(file: InputFile, *, unit_bytes: int) -> list[tuple[int, int, int]]:
    """(start, stop, first line number) of each byte range of an uncompressed JSONL file.

    A range starts at the first line start at or after the previous start + ``unit_bytes``, so every
    range but the last holds at least ``unit_bytes`` bytes and no line is cut.
    """
    starts = [(0, 1)]
    target, pos, lines = max(1, unit_bytes), 0, 0
    with open_raw(file.path) as fh:
        while buf := fh.read(SCAN_CHUNK):
            i, counted, seen = max(target - 1 - pos, 0), 0, lines
            while i < len(buf) and (j := buf.find(b"\n", i)) >= 0:
                seen += buf.count(b"\n", counted, j + 1)
                counted = j + 1
                starts.append((pos + j + 1, seen + 1))
                target = pos + j + 1 + unit_bytes
                i = target - 1 - pos
            lines += buf.count(b"\n")
            pos += len(buf)
    if len(starts) > 1 and starts[-1][0] >= pos:
        starts.pop()
    stops = [s for s, _ in starts[1:]] + [pos]
    return [(s, stop, loc) for (s, loc), stop in zip(starts, stops)]


def read_jsonl(unit: WorkUnit, *, batch_rows: int, columns: list[str] | None) -> Iterator[RawBatch]:
    f = unit.file
    out = RowBatcher(f.rel, batch_rows=batch_rows, columns=columns)
    loc = unit.first_loc
    with open_raw(f.path) as raw:
        if f.compression:
            stream, last_pos = decompressed(raw, f.compression), 0
        else:
            raw.seek(unit.start)
            stream = raw
        limit = unit.stop - unit.start if unit.stop >= 0 and not f.compression else -1
        consumed = 0
        try:
            for line, size in _limited_lines(stream, limit):
                consumed += size
                if not f.compression:
                    out.nbytes += size
                if line is None:
                    out.reject(loc, "too_long", f"{f.rel} line {loc}: longer than {MAX_RECORD_BYTES:,} bytes "
                               "without a newline; skipped before parsing")
                else:
                    parse_line(line.removeprefix(BOM) if loc == 1 else line, loc, out)
                loc += 1
                if out.full:
                    if f.compression:
                        out.nbytes, last_pos = raw.tell() - last_pos, raw.tell()
                    yield out.take()
        except READ_ERRORS as exc:
            out.reject(loc, "unreadable", f"{f.rel}: cannot read past line {loc - 1}: {exc}; is the file truncated?")
        if f.compression:
            out.nbytes = max(0, f.size - last_pos)
    _check_range(unit, limit, consumed)
    if not out.empty:
        yield out.take()


def _check_range(unit: WorkUnit, limit: int, consumed: int) -> None:
    """A unit that ends before its planned byte range means the file shrank: an error, never a quiet loss."""
    if limit >= 0 and consumed < limit:
        raise InputError(
            f"{unit.file.path}: {unit.name} ended at byte {unit.start + consumed:,}, before the end of its planned "
            f"range ({unit.stop:,}): the file shrank while the run read it; let the writer finish, then run again"
        )


def _limited_lines(stream: Stream, limit: int) -> Iterator[tuple[bytes | None, int]]:
    """(line with its newline, bytes) of ``stream``, stopping once ``limit`` bytes are read (-1: to EOF).

    A line longer than ``MAX_RECORD_BYTES`` is read past in chunks, never held: it comes as (None, size).
    """
    bounded = limit >= 0
    while not bounded or limit > 0:
        line = stream.readline(MAX_RECORD_BYTES + 1)
        if not line:
            return
        size = len(line)
        if size > MAX_RECORD_BYTES and not line.endswith(b"\n"):
            line, size = None, size + _skip_line(stream)
        yield line, size
        limit -= size


def _skip_line(stream: Stream) -> int:
    skipped = 0
    while (part := stream.readline(SCAN_CHUNK)) and not part.endswith(b"\n"):
        skipped += len(part)
    return skipped + len(part)


def parse_line(line: bytes, loc: int, out: RowBatcher, *, what: str = "line") -> None:
    """Add one JSONL line (or array element) to ``out`` as a row or a reject; blank lines are ignored.

    The nesting depth is bounded before parsing: deeper records are rejected as ``too_deep``.
    """
    if not line.strip():
        return
    body = line.rstrip(b"\r\n")
    if too_deep(body):
        out.reject(loc, "too_deep", f"{out.source} {what} {loc}: nested more than {MAX_DEPTH} levels deep; "
                   "skipped before parsing", raw=body[:200])
        return
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as bad:
            out.reject(
                loc,
                "invalid_utf8",
                f"{out.source} {what} {loc}: byte {bad.start} is not valid UTF-8; re-encode the file as UTF-8",
                raw=body,
            )
            return
        out.reject(loc, "malformed_json", f"{out.source} {what} {loc}: not valid JSON ({exc})", raw=body)
        return
    add_parsed(obj, loc, out, what=what, body=body)


def add_parsed(obj: object, loc: int, out: RowBatcher, *, what: str, body: bytes = b"") -> None:
    """A parsed line or element: a row when it is an object, else a ``not_an_object`` reject."""
    if isinstance(obj, dict):
        out.add(obj, loc)
    else:
        kind = type(obj).__name__
        raw = obj if what == "element" else body
        out.reject(loc, "not_an_object", f"{out.source} {what} {loc}: a JSON {kind}, not an object", raw=raw)


class _Prefixed:
    """A read()-able stream that returns ``head`` before the rest of ``fh``."""

    def __init__(self, head: bytes, fh: Readable):
        self.head, self.fh = head, fh

    def read(self, n: int = -1) -> bytes:
        if not self.head:
            return self.fh.read(n)
        if n < 0:
            out, self.head = self.head + self.fh.read(), b""
            return out
        out, self.head = self.head[:n], self.head[n:]
        return out


def read_json(unit: WorkUnit, *, batch_rows: int, columns: list[str] | None, whole: bool = True
              ) -> Iterator[RawBatch]:
    """A JSON array streamed element by element (loc = 1-based element index), or one JSON document.
    ``whole=False``: never parsed whole (a reader of the first records only, which the scan reaches first)."""
    f = unit.file
    out = RowBatcher(f.rel, batch_rows=batch_rows, columns=columns)
    with open_raw(f.path) as raw:
        stream = decompressed(raw, f.compression)
        try:
            head = stream.read(1 << 16).removeprefix(BOM)
            body = head.lstrip()
            if body.startswith(b"["):
                body, rest = _read_ahead(stream, body, WHOLE_ARRAY_BYTES if whole else 0)
                items = _whole_array(body) if rest is None else None
                if items is None:
                    yield from _array_elements(_Prefixed(body, io.BytesIO() if rest is None else rest), out, raw)
                else:
                    yield from _array_items(items, out)
            elif body:
                parse_line(body + stream.read(), 1, out)
        except READ_ERRORS as exc:
            out.reject(len(out.rows) + 1, "unreadable", f"{f.rel}: cannot read: {exc}; is the file truncated?")
        out.nbytes = f.size
    if not out.empty:
        yield out.take()


def _read_ahead(stream: Readable, body: bytes, limit: int) -> tuple[bytes, Readable | None]:
    """``body`` with what follows in ``stream``, up to ``limit`` bytes in all, and where the rest comes from:
    None when the stream ended within the limit, a stream that raises again when reading failed (so the scan
    keeps every element before the damage, as it does reading the stream itself)."""
    parts, size = [body], len(body)
    try:
        while size <= limit:
            chunk = stream.read(limit + 1 - size)
            if not chunk:
                return b"".join(parts), None
            parts.append(chunk)
            size += len(chunk)
    except READ_ERRORS as exc:
        return b"".join(parts), _Failing(exc)
    return b"".join(parts), stream


class _Failing:
    """The rest of a stream that failed: its next read raises that error again."""

    def __init__(self, error: BaseException):
        self.error = error

    def read(self, n: int = -1) -> bytes:
        raise self.error


def _whole_array(body: bytes) -> list | None:
    """The elements of a whole JSON array text, or None when the scan must read it: not valid JSON (then one
    damaged element must lose only itself), or an element nested deeper than ``MAX_DEPTH``."""
    try:
        items = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(items, list) or nesting_depth(body) > MAX_DEPTH + 1:  # + 1: the array itself
        return None
    return items


def _array_items(items: list, out: RowBatcher) -> Iterator[RawBatch]:
    for index, item in enumerate(items, 1):
        add_parsed(item, index, out, what="element")
        if out.full:
            yield out.take()


def _array_elements(stream: _Prefixed, out: RowBatcher, raw: IO[bytes]) -> Iterator[RawBatch]:
    stream.read(1)  # the opening bracket
    for element in ArrayScanner(stream):
        if element.data is None:
            out.reject(element.index, *_SKIPPED[element.problem](out.source, element.index))
        else:
            parse_line(element.data.strip(), element.index, out, what="element")
        if out.full:
            yield out.take()


_SKIPPED = {
    "too_deep": lambda src, i: ("too_deep", (f"{src} element {i}: nested deeper than {MAX_DEPTH} levels; "
                                             "skipped before parsing")),
    "too_long": lambda src, i: ("too_long", (f"{src} element {i}: longer than {MAX_RECORD_BYTES:,} bytes; "
                                             "skipped before parsing")),
    "unterminated": lambda src, i: ("unreadable", (f"{src} element {i}: the file ends inside this element "
                                                   "(no closing bracket); is the file truncated?")),
}
