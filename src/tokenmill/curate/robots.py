"""``robots``: was each document's URL allowed, for the AI crawlers named, by its site's robots.txt?

The robots.txt files come from a **snapshot** taken when the pages were crawled, never from the network
(the decision date is the crawl date, not today):

* a directory of ``<host>.txt`` files (``www.example.com.txt``); its date is each file's modification time;
* a robots.txt WARC (Common Crawl publishes one per crawl): every ``response`` record whose target is a
  ``/robots.txt``, with its ``WARC-Date``. A host fetched more than once is judged by the capture made at or
  before the document's own ``date`` (its ``WARC-Date``, in ``meta``), else the earliest one after it; a
  document without a date by the latest. An HTTP 4xx capture means "no robots.txt" (RFC 9309 §2.3.1.3);
  a 5xx one means the site could not be read, which RFC 9309 §2.3.1.4 treats as a complete disallow.

A document's host is looked up as written, then with or without its ``www.`` prefix. Each file is parsed
by ``protego`` (RFC 9309: longest match, ``*`` and ``$`` wildcards, product-token matching), once per host
per worker. ``agents`` (default :data:`AI_AGENTS`) are asked in order; the URL is allowed when every one
of them may fetch it. ``robots.blocking_agent`` names the first agent whose own group blocks it, or ``*``
when only the catch-all group does.

Statistics: ``robots.status`` (``ok``; ``no_robots``: the host has no file in the snapshot; ``unreadable``:
its file is not UTF-8 text, is an HTML page, or its capture was a server error; ``no_url``),
``robots.allowed`` (null unless ``ok``), ``robots.blocking_agent``, ``robots.snapshot`` (``file@date``:
which file and capture decided). Rules: ``disallowed``; ``no_robots`` and ``unreadable`` only when
``missing`` / ``unreadable`` is ``remove``. Defaults: a host without a robots.txt is kept (nothing was
asked; the funnel counts them as ``robots.status = no_robots``); an unreadable one is removed, as RFC 9309
says of a site whose robots.txt cannot be fetched. A document without a URL is kept (``no_url``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa

from tokenmill._extras import require, require_installed
from tokenmill.curate.docmeta import meta_values, strings
from tokenmill.curate.step import Scored

AI_AGENTS = ("GPTBot", "ClaudeBot", "anthropic-ai", "CCBot", "Google-Extended", "Applebot-Extended", "PerplexityBot",
             "Bytespider", "meta-externalagent", "*")
POLICIES = ("keep", "remove")
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
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ("missing", "unreadable")

    def __post_init__(self) -> None:
        if not self.snapshot:
            raise ValueError("snapshot: give the robots.txt snapshot of the crawl (a directory of <host>.txt files, "
                             "or a robots.txt WARC), e.g. --robots-snapshot robots/ or robots_snapshot: robots/")
        if not Path(self.snapshot).exists():
            raise ValueError(f"snapshot: no file or directory {self.snapshot!r}")
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
        rows = [judge.judge(url, date) for url, date in zip(strings(batch, "url"), dates)]
        cols = list(zip(*rows)) if rows else [(), (), (), ()]
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
        host = _host(url)
        if host is None:
            return "no_url", None, None, None
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


def _host(url: str | None) -> str | None:
    if not url:
        return None
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    return host.rstrip(".").lower() if host else None


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
    """The text of a robots.txt, or None when it is not one (not UTF-8, NUL bytes, an HTML page)."""
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


def _load_directory(root: Path) -> dict[str, list[Capture]]:
    out: dict[str, list[Capture]] = {}
    for f in sorted(root.glob("*.txt")):
        mtime = dt.datetime.fromtimestamp(f.stat().st_mtime, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        out[f.stem.lower()] = [Capture(decode_robots(f.read_bytes()), f.name, mtime)]
    return out


def _load_warc(path: Path) -> dict[str, list[Capture]]:
    warc = require("fastwarc.warc", "warc", "read a robots.txt WARC")
    from tokenmill.io.formats import open_raw

    out: dict[str, list[Capture]] = {}
    with open_raw(str(path)) as raw:
        records = warc.ArchiveIterator(raw, record_types=warc.WarcRecordType.response, parse_http=True)
        for number, record in enumerate(records, start=1):
            url = str(record.headers.get("WARC-Target-URI") or "").strip("<>")
            host = _host(url)
            if host is None or urlsplit(url).path != "/robots.txt" or not record.is_http_parsed:
                continue
            status = record.http_headers.status_code or 0
            body = record.reader.read()
            text = decode_robots(body) if status < 400 else None
            where = f"{path.name}#{number}"
            out.setdefault(host, []).append(Capture(text, where, str(record.headers.get("WARC-Date") or ""),
                                                    missing=400 <= status < 500))
    return out
