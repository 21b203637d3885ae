"""Plain text reader: one document per file, per non-empty line, or per blank-line-separated paragraph.

``auto`` picks "line" when the median length of the first 200 non-empty lines is at least 1,000
characters (one article per line, as in many web dumps) and "file" otherwise (books, code, prose). Rows
are ``{"text": ...}``; ``loc`` is the 1-based line of the document's first line (1 in file mode).
"""

from __future__ import annotations

import codecs
import statistics
from collections.abc import Iterator

from tokenmill.io.base import InputFile, RawBatch, WorkUnit
from tokenmill.io.formats import READ_ERRORS, Stream, open_stream
from tokenmill.io.rows import RowBatcher

AUTO_SAMPLE_LINES = 200
AUTO_SAMPLE_BYTES = 16 << 20
LONG_LINE_CHARS = 1000
RAW_CAP = 1 << 16  # bytes of an undecodable file kept in its reject
BOM = b"\xef\xbb\xbf"


def resolve_text_mode(file: InputFile, text_mode: str) -> str:
    """``text_mode`` itself, or for "auto" the mode the first lines of ``file`` call for."""
    if text_mode != "auto":
        return text_mode
    lengths: list[int] = []
    budget = AUTO_SAMPLE_BYTES
    with open_stream(file.path, file.compression) as fh:
        try:
            while len(lengths) < AUTO_SAMPLE_LINES and budget > 0 and (line := fh.readline(budget)):
                budget -= len(line)
                if line.strip():
                    lengths.append(len(line.strip().decode("utf-8", "replace")))
        except READ_ERRORS:
            pass  # a damaged file: decide from the lines read; reading it reports the damage
    if lengths and statistics.median(lengths) >= LONG_LINE_CHARS:
        return "line"
    return "file"


def read_text(
    unit: WorkUnit,
    *,
    batch_rows: int,
    text_mode: str,
    columns: list[str] | None,
    limit_bytes: int = -1,
) -> Iterator[RawBatch]:
    """Documents of one text file; ``limit_bytes`` caps what file mode reads (for sampling)."""
    f = unit.file
    mode = resolve_text_mode(f, text_mode)
    out = RowBatcher(f.rel, batch_rows=batch_rows, columns=columns)
    with open_stream(f.path, f.compression) as fh:
        try:
            if mode == "file":
                _whole_file(fh, out, limit_bytes)
            else:
                yield from _by_blocks(fh, out, paragraphs=mode == "paragraph")
        except READ_ERRORS as exc:
            out.reject(0, "unreadable", f"{f.rel}: cannot read to the end: {exc}; is the file truncated?")
    if not out.empty:
        yield out.take()


def _whole_file(fh: Stream, out: RowBatcher, limit_bytes: int) -> None:
    data = fh.read(limit_bytes).removeprefix(BOM)
    out.nbytes = len(data)
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=limit_bytes < 0)
    except UnicodeDecodeError as bad:
        detail = f"{out.source}: byte {bad.start} is not valid UTF-8; re-encode the file as UTF-8"
        out.reject(1, "invalid_utf8", detail, raw=data[:RAW_CAP])
        return
    if text.strip():
        out.add({"text": text}, 1)


def _by_blocks(fh: Stream, out: RowBatcher, *, paragraphs: bool) -> Iterator[RawBatch]:
    """One document per non-empty line, or per run of non-empty lines when ``paragraphs``."""
    block: list[bytes] = []
    first = 0
    for number, line in enumerate(fh, start=1):
        out.nbytes += len(line)
        if number == 1:
            line = line.removeprefix(BOM)
        if not line.strip():
            _emit(block, first, out)
            block = []
        else:
            if not block:
                first = number
            block.append(line)
            if not paragraphs:
                _emit(block, first, out)
                block = []
        if out.full:
            yield out.take()
    _emit(block, first, out)


def _emit(block: list[bytes], loc: int, out: RowBatcher) -> None:
    if not block:
        return
    data = b"".join(block).rstrip(b"\r\n")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as bad:
        detail = f"{out.source} line {loc}: byte {bad.start} is not valid UTF-8; re-encode the file as UTF-8"
        out.reject(loc, "invalid_utf8", detail, raw=data)
        return
    out.add({"text": text}, loc)
