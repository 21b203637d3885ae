"""The robots.txt snapshot of a crawl, read for the ``robots`` step (:mod:`tokenmill.curate.consent.robots`): host ->
its captures, from a directory of ``<host>.txt`` files or a robots.txt WARC.

Hosts are keyed in their ASCII (punycode) form (:func:`tokenmill.curate.filters.url.host_key`), file suffixes in
any case. Only the first :data:`MAX_ROBOTS_BYTES` of a robots.txt are kept, as RFC 9309 §2.5 allows (a
30 MB file otherwise cost a minute and 2 GB per worker to parse). A snapshot that cannot be right fails:
a directory without a ``<host>.txt`` file (checked by the step), a file that is not a WARC, a WARC without a
robots.txt response, and a damaged WARC, with the byte where the damage is: fastwarc ends quietly at a cut
gzip member or record, which would leave every host after it ``no_robots`` and its pages kept.
"""

from __future__ import annotations

import datetime as dt
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmill._extras import require
from tokenmill.curate.filters.url import absolute_url, host_key
from tokenmill.errors import InputError
from tokenmill.io.formats import open_raw

MAX_ROBOTS_BYTES = 500 << 10  # RFC 9309 §2.5: crawlers must parse at least 500 KiB; we parse exactly that


@dataclass(frozen=True)
class Capture:
    """One robots.txt as the snapshot holds it: text (None when unreadable), where it came from, when."""

    text: str | None
    where: str
    date: str
    missing: bool = False  # an HTTP 4xx capture: the site has no robots.txt


def pick_capture(captures: list[Capture], date: str | None) -> Capture | None:
    """The capture that judged a page crawled at ``date``: the latest at or before it, else the earliest."""
    if not captures:
        return None
    ordered = sorted(captures, key=lambda c: c.date)
    if not date:
        return ordered[-1]
    before = [c for c in ordered if c.date[:19] <= str(date)[:19]]
    return before[-1] if before else ordered[0]


def decode_robots(body: bytes) -> str | None:
    """The text of a robots.txt, or None when it is not one (not UTF-8, NUL bytes, an HTML page).

    Only the first :data:`MAX_ROBOTS_BYTES` are read, as RFC 9309 §2.5 allows, up to the last whole line
    in them (a cut line could turn ``Disallow: /private`` into ``Disallow: /p``)."""
    if len(body) > MAX_ROBOTS_BYTES:
        body = body[: body.rfind(b"\n", 0, MAX_ROBOTS_BYTES) + 1]
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    head = text[:512].lstrip().lower()
    if "\x00" in text or head.startswith(("<!doctype", "<html", "<?xml")):
        return None
    return text


def load_snapshot(path: str) -> dict[str, list[Capture]]:
    """Host -> its captures, from a directory of ``<host>.txt`` files or a robots.txt WARC."""
    p = Path(path)
    return _load_directory(p) if p.is_dir() else _load_warc(p)


def snapshot_files(root: Path) -> list[Path]:
    """The ``<host>.txt`` files of a snapshot directory, whatever the case of the suffix (``.TXT``)."""
    return sorted(f for f in root.iterdir() if f.suffix.lower() == ".txt" and f.is_file())


def _load_directory(root: Path) -> dict[str, list[Capture]]:
    out: dict[str, list[Capture]] = {}
    for f in snapshot_files(root):
        mtime = dt.datetime.fromtimestamp(f.stat().st_mtime, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with f.open("rb") as fh:
            body = fh.read(MAX_ROBOTS_BYTES + 1)
        out[host_key(f.stem)] = [Capture(decode_robots(body), f.name, mtime)]
    return out


def _load_warc(path: Path) -> dict[str, list[Capture]]:
    """Every robots.txt response of the WARC. A damaged file fails with where the damage is, rather than
    leave every host after it without a robots.txt (and kept); a file that is not a WARC, or holds no
    robots.txt response, fails too."""
    warc = require("fastwarc.warc", "warc", "read a robots.txt WARC")
    out: dict[str, list[Capture]] = {}
    number = last = 0
    with open_raw(str(path)) as raw:
        try:
            for number, record in enumerate(warc.ArchiveIterator(raw, parse_http=True), start=1):
                if record.record_type == warc.WarcRecordType.response:
                    _add_capture(out, record, f"{path.name}#{number}")
                last = record.stream_pos
        except OSError as exc:  # fastwarc: "Invalid WARC header", "Gzip decompression error"
            if number:
                raise InputError(_damaged(path, raw, last, exc)) from None
            raise InputError(f"robots snapshot {path}: not a WARC file ({exc}); give a robots.txt WARC (Common "
                             "Crawl's crawl-data/.../robotstxt/ files) or a directory of <host>.txt files") from None
        _check_tail(raw, last, path)
    if not out:
        raise InputError(f"robots snapshot {path}: no robots.txt response record in it; give the robots.txt WARC "
                         "of the crawl, or a directory of <host>.txt files")
    return out


def _check_tail(raw: Any, last: int, path: Path) -> None:
    """fastwarc ends quietly where a file is damaged or cut: read again from the start of the last record it
    gave (the last record alone when the file is whole) and fail where the data breaks. Gzip members are
    decompressed to their end; an uncompressed record must hold the bytes its Content-Length announces."""
    raw.seek(last)
    tail = raw.read()
    if not tail.startswith(b"\x1f\x8b"):
        head_end = tail.find(b"\r\n\r\n")
        announced = re.search(rb"(?im)^content-length:\s*(\d+)", tail[:head_end])
        if head_end < 0 or not announced or len(tail) < head_end + 4 + int(announced.group(1)):
            raise InputError(_damaged(path, raw, last, "the file ends inside a record"))
        return
    pos = 0
    while pos < len(tail):
        member, data = zlib.decompressobj(31), tail[pos:]
        try:
            while data and not member.eof:
                member.decompress(data, 16 << 20)  # output bounded: the rest of the input waits in unconsumed_tail
                data = member.unconsumed_tail
        except zlib.error as exc:
            raise InputError(_damaged(path, raw, last, exc)) from None
        if not member.eof:
            raise InputError(_damaged(path, raw, last, "the file ends inside a gzip member"))
        pos = len(tail) - len(member.unused_data)


def _damaged(path: Path, raw: Any, last: int, why: Any) -> str:
    return (f"robots snapshot {path}: the data after byte {last:,} of {raw.tell():,} is damaged or cut ({why}); "
            "every host after it would be judged without its robots.txt: fetch the file again")


def _add_capture(out: dict[str, list[Capture]], record: Any, where: str) -> None:
    """A robots.txt response's capture (its body read up to :data:`MAX_ROBOTS_BYTES`, and checked whole)."""
    parts = absolute_url(str(record.headers.get("WARC-Target-URI") or "").strip("<>"))
    if parts is None or parts.path != "/robots.txt" or not record.is_http_parsed:
        return
    body, complete = _read_capped(record.reader, record.content_length)
    if not complete:
        raise InputError(f"robots snapshot record {where} (byte {record.stream_pos:,} of the file) is cut: "
                         f"{record.content_length:,} bytes announced; fetch the file again")
    status = record.http_headers.status_code or 0
    text = decode_robots(body) if status < 400 else None
    out.setdefault(host_key(parts.hostname), []).append(
        Capture(text, where, str(record.headers.get("WARC-Date") or ""), missing=400 <= status < 500))


def _read_capped(reader: Any, expected: int) -> tuple[bytes, bool]:
    """The first :data:`MAX_ROBOTS_BYTES` (and a byte more) of a record's body, and whether the body is as
    long as announced (the rest is read in chunks and dropped: a 30 MB robots.txt costs no 30 MB)."""
    head = reader.read(MAX_ROBOTS_BYTES + 1)
    seen = len(head)
    while chunk := reader.read(1 << 20):
        seen += len(chunk)
    return head, seen >= expected
