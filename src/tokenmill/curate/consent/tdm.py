"""``tdm_optout``: did the page reserve its text-and-data-mining rights (EU DSM Directive art. 4(3))?

Machine-readable reservations, in the order they are read (the first one found decides):

1. the HTTP response headers (WARC input keeps them in ``meta.http_headers``): ``tdm-reservation: 1``
   (W3C TDM Reservation Protocol, TDMRep), with ``tdm-policy`` recorded when given; ``X-Robots-Tag``
   holding ``noai`` for every agent or for one of ``agents`` (``GPTBot: noai``);
2. the HTML head (``meta.html_head``, or a ``meta.html`` column of the input): ``<meta name="tdm-reservation"
   content="1">`` and ``<meta name="robots" content="... noai ...">``;
3. the site's ``/.well-known/tdmrep.json`` when ``snapshot`` is a directory holding ``<host>.tdmrep.json``:
   the first rule whose ``location`` (a path pattern, ``*`` any characters) matches the URL's path. A URL
   without a scheme is read as ``https://`` + it, hosts and file names are compared in their ASCII
   (punycode) form and the suffix in any case (:mod:`tokenmill.curate.filters.url`); more than 5% of a batch's URLs
   naming no host fail the step (:func:`tokenmill.curate.docmeta.check_urls`).

``tdm-reservation: 0`` (header, meta or tdmrep.json) is an explicit "not reserved" and stops the search.
``noimageai`` reserves images only and is not a reservation of the text. Statistics: ``tdm.reserved``
(bool), ``tdm.source`` (``header:tdm-reservation``, ``header:x-robots-tag``, ``meta:tdm-reservation``,
``meta:robots``, ``tdmrep.json``; null when nothing was reserved), ``tdm.policy`` (the ``tdm-policy``
URL when one was given). Rule: ``reserved`` (only when ``reserved: remove``, the default).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from tokenmill.curate.consent.robots import AI_AGENTS
from tokenmill.curate.docmeta import check_urls, meta_values, strings
from tokenmill.curate.filters.url import absolute_url, host_key
from tokenmill.steps.contract import Scored

_META = re.compile(r"<meta\b[^>]*>", re.IGNORECASE)
_ATTR = re.compile(r"""\b(name|content)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)
Found = tuple[bool, str | None, str | None]  # reserved, source, policy
NOTHING: Found = (False, None, None)
TDMREP_SUFFIX = ".tdmrep.json"


@dataclass(frozen=True)
class TdmOptout:
    snapshot: str | None = None
    agents: Any = AI_AGENTS
    reserved: str = "remove"
    _rules: Any = field(default=None, init=False, repr=False, compare=False)

    name: ClassVar[str] = "tdm"
    version: ClassVar[int] = 2
    decision_params: ClassVar[tuple] = ("reserved",)

    def __post_init__(self) -> None:
        if self.snapshot is not None and not Path(self.snapshot).exists():
            raise ValueError(f"snapshot: no file or directory {self.snapshot!r}")
        agents = [self.agents] if isinstance(self.agents, str) else self.agents
        if not isinstance(agents, (list, tuple)) or not all(isinstance(a, str) for a in agents):
            raise ValueError(f"agents: expected a list of crawler names such as [GPTBot], got {self.agents!r}")
        object.__setattr__(self, "agents", list(agents))
        if self.reserved not in ("keep", "remove"):
            raise ValueError(f"reserved: expected keep or remove, got {self.reserved!r}")

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_rules": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def setup(self) -> None:
        if self._rules is None:
            object.__setattr__(self, "_rules", load_tdmrep(self.snapshot))

    def score(self, batch: pa.RecordBatch) -> Scored:
        self.setup()
        agents = {a.lower() for a in self.agents}
        metas = meta_values(batch, "http_headers", "html_head", "html")
        urls = strings(batch, "url")
        if self._rules:  # only tdmrep.json rules are looked up by URL
            check_urls(self.name, urls, [absolute_url(u) is not None for u in urls])
        found = [reservation(m, url, agents, self._rules) for m, url in zip(metas, urls)]
        cols = list(zip(*found)) if found else [(), (), ()]
        return Scored({"reserved": np.array(cols[0], dtype=bool), "source": pa.array(cols[1], pa.string()),
                       "policy": pa.array(cols[2], pa.string())})

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        reserved = np.asarray(scores["reserved"], dtype=bool)
        out = np.full(len(reserved), None, dtype=object)
        if self.reserved == "remove":
            out[reserved] = "reserved"
        return out


def reservation(meta: dict, url: str | None, agents: set[str], rules: dict[str, list]) -> Found:
    """The first reservation (or explicit non-reservation) of one document, in the module's order."""
    for found in (_from_headers(meta.get("http_headers"), agents),
                  _from_html(meta.get("html_head") or meta.get("html")),
                  _from_tdmrep(url, rules)):
        if found is not None:
            return found
    return NOTHING


def _from_headers(headers: Any, agents: set[str]) -> Found | None:
    if not isinstance(headers, dict):
        return None
    h = {str(k).lower(): str(v) for k, v in headers.items()}
    flag = h.get("tdm-reservation", "").strip()
    if flag in ("0", "1"):
        return (flag == "1", "header:tdm-reservation" if flag == "1" else None, h.get("tdm-policy"))
    if _robots_tag_noai(h.get("x-robots-tag", ""), agents):
        return True, "header:x-robots-tag", None
    return None


def _robots_tag_noai(value: str, agents: set[str]) -> bool:
    """``noai`` in an ``X-Robots-Tag`` value, for every agent or one of ``agents`` (``GPTBot: noai``)."""
    target: str | None = None
    for part in re.split(r"\s*,\s*", value.strip().lower()):
        m = re.match(r"^([\w.-]+)\s*:\s*(.*)$", part)
        if m and m.group(1) not in ("unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"):
            target, part = m.group(1), m.group(2)
        if part.strip() == "noai" and (target is None or target in agents):
            return True
    return False


def _from_html(html: Any) -> Found | None:
    if not isinstance(html, str):
        return None
    for tag in _META.findall(html):
        attrs = {m.group(1).lower(): (m.group(2) or m.group(3) or m.group(4) or "") for m in _ATTR.finditer(tag)}
        name, content = attrs.get("name", "").strip().lower(), attrs.get("content", "").strip().lower()
        if name == "tdm-reservation" and content in ("0", "1"):
            return (content == "1", "meta:tdm-reservation" if content == "1" else None, None)
        if name == "robots" and "noai" in re.split(r"[\s,]+", content):
            return True, "meta:robots", None
    return None


def _from_tdmrep(url: str | None, rules: dict[str, list]) -> Found | None:
    parts = absolute_url(url) if rules else None
    if parts is None:
        return None
    host = host_key(parts.hostname)
    for location, flag, policy in rules.get(host) or rules.get(host.removeprefix("www.")) or []:
        if location.match(parts.path or "/"):
            return (flag == 1, "tdmrep.json" if flag == 1 else None, policy)
    return None


def load_tdmrep(snapshot: str | None) -> dict[str, list]:
    """Host -> its tdmrep.json rules ``(compiled location, reservation, policy)``, from ``<host>.tdmrep.json``
    files in the snapshot directory; a file that is not a JSON list of rules is ignored (it reserves nothing)."""
    if not snapshot or not Path(snapshot).is_dir():
        return {}
    out: dict[str, list] = {}
    for f in sorted(p for p in Path(snapshot).iterdir() if p.name.lower().endswith(TDMREP_SUFFIX) and p.is_file()):
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        rules = [_rule(r) for r in doc if isinstance(r, dict)] if isinstance(doc, list) else []
        out[host_key(f.name[: -len(TDMREP_SUFFIX)])] = [r for r in rules if r is not None]
    return out


def _rule(rule: dict) -> tuple | None:
    try:
        flag = int(rule.get("tdm-reservation", ""))  # missing: "" is no number, as null is none
    except (TypeError, ValueError):
        return None
    location = str(rule.get("location") or "/")
    pattern = re.compile("".join(".*" if ch == "*" else re.escape(ch) for ch in location))
    return pattern, flag, rule.get("tdm-policy")
