"""``pii``: replace e-mail addresses, IPv4/IPv6 addresses and phone numbers by placeholders.

A modifier: it removes no document. Statistics: ``pii.email``, ``pii.ip``, ``pii.phone`` (replacements
in each document); the run's counts gain ``pii:email``, ``pii:ip``, ``pii:phone``.

What is matched (precision measured on labelled examples in BENCHMARKS.md):

* e-mail: ``local@domain.tld`` (ASCII letters, digits and ``._%+-`` before the ``@``; a dotted domain
  ending in 2+ letters).
* IPv4: four dotted numbers 0-255, not inside a longer dotted number (``1.2.3.4.5``), not after a
  letter (``v1.2.3.4``) and not after the words version, ver, release or build (version numbers).
* IPv6: colon-hex groups that Python's ``ipaddress`` accepts, with at least two non-empty groups and
  one digit (so C++ ``a::b`` and times such as ``12:30:45`` are left alone).
* phone: North-American style ``(814) 360 8593``, ``+1-212-456-7890``, ``425 882 9090``,
  ``052 5552606`` (3-3-4 digits with optional separators; unseparated ten-digit numbers only when the
  area and exchange codes start with 2-9, so ISBNs and Unix times stay), and international numbers
  written with a leading ``+`` (8-15 digits in all). Dates (``2021-03-04``, ``03.04.2021``), prices
  and version numbers do not have these shapes.

Each pattern has a cheap superset (no lookarounds) that Arrow's regular-expression engine tests over the
whole batch; only the documents a superset matches are rewritten, with Python's ``re`` and only that
pattern, one document at a time (per-document Python where something may be found; measured in
BENCHMARKS.md).
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.steps.contract import Scored

EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![\w-])")
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = re.compile(rf"(?<![\w.])(?:{_OCTET}\.){{3}}{_OCTET}(?!\.?\d)(?!\w)")
IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])")
PHONE = re.compile(
    r"(?<![\w+])(?:"
    r"(?:\+?1[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]?\d{4}"  # separated 3-3-4
    r"|(?:\+?1)?[2-9]\d{2}[2-9]\d{6}"  # unseparated NANP
    r"|\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){2,5}"  # international with +
    r")(?![\w])"
)
VERSION_WORDS = re.compile(r"(?:version|ver|release|build|v)\.?\s*$", re.IGNORECASE)
# supersets of each pattern in the regex engine Arrow runs over whole batches (no lookarounds there)
CANDIDATES = {"email": r"[A-Za-z0-9._%+-]@[A-Za-z0-9-]+\.", "ip4": r"\d\.\d{1,3}\.\d{1,3}\.\d",
              "ip6": r"[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:", "phone": r"\d{3}[ .)-]{0,2}\d{3}|\+\d"}


def _phone_ok(m: re.Match) -> bool:
    digits = sum(c.isdigit() for c in m.group(0))
    return 10 <= digits <= 15 if not m.group(0).startswith("+") else 8 <= digits <= 15


def _ipv6_ok(m: re.Match) -> bool:
    s = m.group(0)
    if sum(1 for g in s.split(":") if g) < 2 or not any(c.isdigit() for c in s):
        return False
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def _ipv4_ok(m: re.Match, text: str) -> bool:
    return not VERSION_WORDS.search(text[max(0, m.start() - 12):m.start()])


@dataclass(frozen=True)
class Pii:
    email: bool = True
    ip: bool = True
    phone: bool = True
    email_placeholder: str = "<EMAIL>"
    ip_placeholder: str = "<IP_ADDRESS>"
    phone_placeholder: str = "<PHONE_NUMBER>"

    name: ClassVar[str] = "pii"
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ()

    def __post_init__(self) -> None:
        for key in ("email", "ip", "phone"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(f"{key}: expected true or false, got {getattr(self, key)!r}")
        for key in ("email_placeholder", "ip_placeholder", "phone_placeholder"):
            if not isinstance(getattr(self, key), str):
                raise ValueError(f"{key}: expected a string, got {getattr(self, key)!r}")

    def setup(self) -> None:
        pass

    def redact(self, text: str, only: set[str] | None = None) -> tuple[str, dict[str, int]]:
        """``text`` with every match replaced, and the number of replacements per type.

        ``only`` limits the patterns tried (``email``, ``ip4``, ``ip6``, ``phone``): those whose cheap
        superset matched the text.
        """
        only = set(CANDIDATES) if only is None else only
        counts = {"email": 0, "ip": 0, "phone": 0}

        def sub(pattern: re.Pattern, kind: str, placeholder: str, ok: Any, s: str) -> str:
            def repl(m: re.Match) -> str:
                if not ok(m, s):
                    return m.group(0)
                counts[kind] += 1
                return placeholder
            return pattern.sub(repl, s)

        if self.email and "email" in only and "@" in text:
            text = sub(EMAIL, "email", self.email_placeholder, lambda m, s: True, text)
        if self.ip and "ip4" in only:
            text = sub(IPV4, "ip", self.ip_placeholder, _ipv4_ok, text)
        if self.ip and "ip6" in only and ":" in text:
            text = sub(IPV6, "ip", self.ip_placeholder, lambda m, s: _ipv6_ok(m), text)
        if self.phone and "phone" in only:
            text = sub(PHONE, "phone", self.phone_placeholder, lambda m, s: _phone_ok(m), text)
        return text, counts

    def score(self, batch: pa.RecordBatch) -> Scored:
        text = batch.column("text")
        n = len(text)
        masks = {k: np.asarray(pc.fill_null(pc.match_substring_regex(text, pattern), False))
                 for k, pattern in CANDIDATES.items()}
        maybe = np.flatnonzero(np.logical_or.reduce(list(masks.values())))
        found = {k: np.zeros(n, dtype=np.int64) for k in ("email", "ip", "phone")}
        if len(maybe) == 0:
            return Scored(found, text=text)
        rewritten = text.to_pylist()
        for i in maybe.tolist():
            rewritten[i], c = self.redact(rewritten[i], {k for k, m in masks.items() if m[i]})
            for k, v in c.items():
                found[k][i] = v
        totals = Counter({f"pii:{k}": int(v.sum()) for k, v in found.items() if v.sum()})
        return Scored(found, text=pa.array(rewritten, pa.large_string()), counts=totals)

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.full(len(scores["email"]), None, dtype=object)
