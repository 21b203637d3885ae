"""``robots``: was each document's URL allowed, for the AI crawlers named, by its site's robots.txt?

The robots.txt files come from a **snapshot** taken when the pages were crawled, never from the network
(the decision date is the crawl date, not today):

* a directory of ``<host>.txt`` files (``www.example.com.txt``); its date is each file's modification time;
* a robots.txt WARC (Common Crawl publishes one per crawl): every ``response`` record whose target is a
  ``/robots.txt``, with its ``WARC-Date``. A host fetched more than once is judged by the capture made at or
  before the document's own ``date`` (its ``WARC-Date``, in ``meta``), else the earliest one after it; a
  document without a date by the latest. An HTTP 4xx capture means "no robots.txt" (RFC 9309 §2.3.1.3);
  a 5xx one means the site could not be read, which RFC 9309 §2.3.1.4 treats as a complete disallow.

A URL without a scheme (``example.com/page``, as Dolma and Common Crawl index exports write it) is read as
``https://example.com/page`` (:func:`tokenmill.curate.url.absolute_url`); captures are keyed by host, so the
``https`` capture and the ``http`` one both judge it. A document's host is looked up in its ASCII form
(``bücher.example`` and ``xn--bcher-kva.example`` are one host, whichever form the file name or the URL
uses; a ``.TXT`` suffix is a ``.txt``), as written, then with or without its ``www.`` prefix. Only the first
500 KiB of a robots.txt are parsed (RFC 9309 §2.5). Each file is parsed
by ``protego`` (RFC 9309: longest match, ``*`` and ``$`` wildcards, product-token matching), once per host
per worker. ``agents`` (default :data:`AI_AGENTS`) are asked in order; the URL is allowed when every one
of them may fetch it. ``robots.blocking_agent`` names the first agent whose own group blocks it, or ``*``
when only the catch-all group does.

Statistics: ``robots.status`` (``ok``; ``no_robots``: the host has no file in the snapshot; ``unreadable``:
its file is not UTF-8 text, is an HTML page, or its capture was a server error; ``no_url``: the document
has none; ``bad_url``: its URL names no host),
``robots.allowed`` (null unless ``ok``), ``robots.blocking_agent``, ``robots.snapshot`` (``file@date``:
which file and capture decided). Rules: ``disallowed``; ``no_robots`` and ``unreadable`` only when
``missing`` / ``unreadable`` is ``remove``. Defaults: a host without a robots.txt is kept (nothing was
asked; the funnel counts them as ``robots.status = no_robots``); an unreadable one is removed, as RFC 9309
says of a site whose robots.txt cannot be fetched. A document without a URL is kept (``no_url``), and
so is one whose URL names no host (``bad_url``) unless more than 5% of a batch's URLs do: then the step
fails (:func:`tokenmill.curate.docmeta.check_urls`), since it could judge none of them.

Loud failures: a snapshot directory without a ``<host>.txt`` file, a file that is not a WARC, a WARC
without a robots.txt response, and a damaged WARC (a cut gzip member or record) fail with where the damage
is, instead of judging every host after it ``no_robots``. A snapshot that matches none of a run's hosts is
said in the data card's warnings (:mod:`tokenmill.report.datacard`).
"""

from __future__ import annotations

import datetime as dt
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from tokenmill._extras import require, require_installed
from tokenmill.curate.docmeta import check_urls, meta_values, strings
from tokenmill.curate.step import Scored
from tokenmill.curate.url import absolute_url, host_key
from tokenmill.errors import InputError

AI_AGENTS = ("GPTBot", "ClaudeBot", "anthropic-ai", "CCBot", "Google-Extended", "Applebot-Extended", "PerplexityBot",
             "Bytespider", "meta-externalagent", "*")
POLICIES = ("keep", "remove")
MAX_ROBOTS_BYTES = 500 << 10  # RFC 9309 §2.5: crawlers must parse at least 500 KiB; we parse exactly that
_UA = re.compile(r"^\s*user-agent\s*:\s*([^#\s]+)", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Capture:
    """One robots.txt as the snapshot holds it: text (None when unreadable), where it came from, when."""

    text: str | None
    where: str
    date: str
    missing: bool = False  # an HTTP 4xx capture: the site has no robots.txt


@dataclass(frozen=True)
class Robots:
    snapshot: str | None = None
    agents: Any = AI_AGENTS
    missing: str = "keep"
    unreadable: str = "remove"
    _state: Any = field(default=None, init=False, repr=False, compare=False)

    name: ClassVar[str] = "robots"
    version: ClassVar[int] = 2
    decision_params: ClassVar[tuple] = ("missing", "unreadable")

    def __post_init__(self) -> None:
        if not self.snapshot:
            raise ValueError("snapshot: give the robots.txt snapshot of the crawl (a directory of <host>.txt files, "
                             "or a robots.txt WARC), e.g. --robots-snapshot robots/ or robots_snapshot: robots/")
        if not Path(self.snapshot).exists():
            raise ValueError(f"snapshot: no file or directory {self.snapshot!r}")
        if Path(self.snapshot).is_dir() and not snapshot_files(Path(self.snapshot)):
            raise ValueError(f"snapshot: {self.snapshot!r} holds no <host>.txt file (www.example.com.txt); give the "
                             "directory of the crawl's robots.txt files, or its robots.txt WARC")
        agents = [self.agents] if isinstance(self.agents, str) else self.agents
        if not isinstance(agents, (list, tuple)) or not agents or not all(isinstance(a, str) and a for a in agents):
            raise ValueError(f"agents: expected a list of crawler names such as [GPTBot, CCBot], got {self.agents!r}")
        object.__setattr__(self, "agents", list(agents))
        for key in ("missing", "unreadable"):
            if getattr(self, key) not in POLICIES:
                raise ValueError(f"{key}: expected keep or remove, got {getattr(self, key)!r}")
        require_installed("protego", "consent", "parse robots.txt files")

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_state": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def setup(self) -> None:
        if self._state is None:
            object.__setattr__(self, "_state", _Judge(load_snapshot(self.snapshot), list(self.agents)))

    def score(self, batch: pa.RecordBatch) -> Scored:
        self.setup()
        judge: _Judge = self._state
        dates = [m["date"] for m in meta_values(batch, "date")]
        urls = strings(batch, "url")
        rows = [judge.judge(url, date) for url, date in zip(urls, dates)]
        cols = list(zip(*rows)) if rows else [(), (), (), ()]
        check_urls(self.name, urls, [status != "bad_url" for status in cols[0]])
        return Scored({"status": pa.array(cols[0], pa.string()), "allowed": pa.array(cols[1], pa.bool_()),
                       "blocking_agent": pa.array(cols[2], pa.string()), "snapshot": pa.array(cols[3], pa.string())})

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        status = np.asarray(scores["status"], dtype=object)
        out = np.full(len(status), None, dtype=object)
        allowed = np.array([a is not None and not bool(a) for a in scores["allowed"]], dtype=bool)
        out[allowed & (status == "ok")] = "disallowed"
        if self.missing == "remove":
            out[status == "no_robots"] = "no_robots"
        if self.unreadable == "remove":
            out[status == "unreadable"] = "unreadable"
        return out


class _Judge:
    """Parses each host's robots.txt once and answers per URL."""

    def __init__(self, captures: dict[str, list[Capture]], agents: list[str]):
        self.captures, self.agents = captures, agents
        self.parsed: dict[int, Any] = {}
        self.protego = require("protego", "consent", "parse robots.txt files").Protego

    def judge(self, url: str | None, date: str | None) -> tuple[str, bool | None, str | None, str | None]:
        if not (url or "").strip():
            return "no_url", None, None, None
        parts = absolute_url(url)
        if parts is None:
            return "bad_url", None, None, None
        url, host = parts.geturl(), host_key(parts.hostname)
        capture = pick_capture(self.captures.get(host) or self.captures.get(_other_www(host)) or [], date)
        if capture is None:
            return "no_robots", None, None, None
        stamp = f"{capture.where}@{capture.date}"
        if capture.missing:
            return "no_robots", None, None, stamp
        if capture.text is None:
            return "unreadable", None, None, stamp
        rules = self._parse(capture)
        blocked = [a for a in self.agents if not rules.can_fetch(url, a)]
        if not blocked:
            return "ok", True, None, stamp
        return "ok", False, _blamed(blocked, capture.text), stamp

    def _parse(self, capture: Capture) -> Any:
        key = id(capture)
        if key not in self.parsed:
            self.parsed[key] = self.protego.parse(capture.text)
        return self.parsed[key]


def _blamed(blocked: list[str], text: str) -> str:
    """The first blocked agent with a group of its own (``*`` when only the catch-all group blocks)."""
    groups = {m.lower() for m in _UA.findall(text)} - {"*"}
    for agent in blocked:
        name = agent.lower()
        if name != "*" and any(re.search(rf"(?<![\w-]){re.escape(g)}", name) for g in groups):
            return agent
    return "*"


def _other_www(host: str) -> str:
    return host.removeprefix("www.") if host.startswith("www.") else f"www.{host}"


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
    from tokenmill.io.formats import open_raw

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
