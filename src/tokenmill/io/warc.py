"""WARC and WET reader (``fastwarc`` + ``resiliparse``, the ``warc`` extra).

WARC: each HTTP 200 HTML ``response`` becomes ``{"id", "url", "text", "date", "http_headers", "html_head",
"html_links"}``, its main content extracted to plain text. What the consent steps read stays beside the
text (in the document's ``meta``): ``http_headers`` (every HTTP response header, names lowercased, repeated
headers joined with ``, ``), ``html_head`` (the page's ``<head>`` element, at most 64 KiB) and
``html_links`` (each ``<a>``/``<link>`` tag with ``rel="license"`` or a Creative Commons deed URL, with the
200 characters of HTML before it, at most 32; see :func:`tokenmill.io.htmlmeta.licence_links`).
Responses that are not HTML or not HTTP 200 are not records: they are counted in ``RawBatch.skipped``.
Requests, metadata and other record types are ignored. WET: each ``conversion`` record as it is, with
``WARC-Identified-Content-Language`` as ``language``. ``loc`` is the 1-based record number in the file,
counting every record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tokenmill._extras import require
from tokenmill.io.base import RawBatch, WorkUnit
from tokenmill.io.formats import READ_ERRORS, open_raw
from tokenmill.io.htmlmeta import decode_html, html_head, licence_links
from tokenmill.io.rows import RowBatcher


def read_warc(unit: WorkUnit, *, batch_rows: int, columns: list[str] | None) -> Iterator[RawBatch]:
    warc = require("fastwarc.warc", "warc", "read WARC files")
    f = unit.file
    out = RowBatcher(f.rel, batch_rows=batch_rows, columns=columns)
    number, last_pos = 0, 0
    with open_raw(f.path) as raw:
        try:
            records = warc.ArchiveIterator(raw, parse_http=True, auto_decode="all")
            for number, record in enumerate(records, start=1):
                _record(warc.WarcRecordType, record, number, out)
                if out.full:
                    out.nbytes, last_pos = raw.tell() - last_pos, raw.tell()
                    yield out.take()
        except READ_ERRORS as exc:
            detail = f"{f.rel}: cannot read past WARC record {number}: {exc}; is the file truncated?"
            out.reject(number + 1, "unreadable", detail)
        out.nbytes = max(0, f.size - last_pos)
    if not out.empty:
        yield out.take()


def _record(types: Any, record: Any, number: int, out: RowBatcher) -> None:
    if record.record_type == types.response:
        _response(record, number, out)
    elif record.record_type == types.conversion:
        _conversion(record, number, out)


def _header(record: Any, name: str) -> str | None:
    value = record.headers.get(name)
    return None if value is None else str(value)


def _base_row(record: Any) -> dict[str, Any]:
    url = _header(record, "WARC-Target-URI")
    if url and url.startswith("<") and url.endswith(">"):  # WARC/1.0 writers that bracket the URI
        url = url[1:-1]
    return {"id": _header(record, "WARC-Record-ID"), "url": url, "date": _header(record, "WARC-Date")}


def _response(record: Any, number: int, out: RowBatcher) -> None:
    if not record.is_http_parsed:
        out.skip("warc_not_http")
        return
    if record.http_headers.status_code != 200:
        out.skip("warc_http_status")
        return
    if "html" not in (record.http_content_type or "").lower():
        out.skip("warc_not_html")
        return
    row = _base_row(record)
    html = decode_html(record.reader.read())  # once, for the text and the context
    row["text"] = _extract(html)
    if not row["text"].strip():
        detail = f"{out.source} record {number} ({row['url']}): no text left after HTML extraction"
        out.reject(number, "empty_text", detail, raw={"id": row["id"], "url": row["url"]})
        return
    row.update(page_context(record.http_headers, html))
    out.add(row, number)


def page_context(http_headers: Any, html: str) -> dict[str, Any]:
    """What the consent steps read of a response besides its text: headers, ``<head>``, licence links
    (``html`` decoded by :func:`tokenmill.io.htmlmeta.decode_html`, UTF-16 and UTF-32 pages included)."""
    headers: dict[str, str] = {}
    for name, value in http_headers.items():
        key = str(name).strip().lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else str(value)
    return {"http_headers": headers, "html_head": html_head(html), "html_links": licence_links(html)}


def html_to_text(body: bytes) -> str:
    """The main content of an HTML page as plain text, whatever its encoding."""
    return _extract(decode_html(body))


def _extract(html: str) -> str:
    html2text = require("resiliparse.extract.html2text", "warc", "extract text from HTML")
    return html2text.extract_plain_text(html, main_content=True)


def _conversion(record: Any, number: int, out: RowBatcher) -> None:
    row = _base_row(record)
    body = record.reader.read()
    try:
        row["text"] = body.decode("utf-8")
    except UnicodeDecodeError as bad:
        detail = f"{out.source} record {number}: byte {bad.start} is not valid UTF-8"
        out.reject(number, "invalid_utf8", detail, raw=body)
        return
    if not row["text"].strip():
        out.reject(number, "empty_text", f"{out.source} record {number}: empty conversion record", raw=row)
        return
    row["language"] = _header(record, "WARC-Identified-Content-Language")
    out.add(row, number)
