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
``https://example.com/page`` (:func:`tokenmill.curate.filters.url.absolute_url`); captures are keyed by host, so the
``https`` capture and the ``http`` one both judge it. A document's host is looked up in its ASCII form
(``bücher.example`` and ``xn--bcher-kva.example`` are one host, whichever form the file name or the URL
uses; a ``.TXT`` suffix is a ``.txt``), as written, then with or without its ``www.`` prefix. Only the first
500 KiB of a robots.txt are parsed (RFC 9309 §2.5; :mod:`tokenmill.curate.consent.robots_snapshot` reads the
snapshot). Each file is parsed by ``protego`` (RFC 9309: longest match, ``*`` and ``$`` wildcards,
product-token matching), once per host per worker. ``agents`` (default :data:`AI_AGENTS`) are asked in
order; the URL is allowed when every one of them may fetch it. ``robots.blocking_agent`` names the first
agent whose own group blocks it, or ``*`` when only the catch-all group does.

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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from tokenmill._extras import require, require_installed
from tokenmill.curate.consent.robots_snapshot import Capture, load_snapshot, pick_capture, snapshot_files
from tokenmill.curate.docmeta import check_urls, meta_values, strings
from tokenmill.curate.filters.url import absolute_url, host_key
from tokenmill.steps.contract import Scored

AI_AGENTS = ("GPTBot", "ClaudeBot", "anthropic-ai", "CCBot", "Google-Extended", "Applebot-Extended", "PerplexityBot",
             "Bytespider", "meta-externalagent", "*")
POLICIES = ("keep", "remove")
_UA = re.compile(r"^\s*user-agent\s*:\s*([^#\s]+)", re.IGNORECASE | re.MULTILINE)


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
            object.__setattr__(self, "_state", _Judge(load_snapshot(self.snapshot or ""), list(self.agents)))

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
