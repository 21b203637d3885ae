"""Summable run statistics and the rejects file.

A ``Stats`` is what one work unit reports; the engine sums them in unit order. The identity
``input == kept + sum(filtered) + sum(rejected)`` holds for every unit and so for the whole run.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

import orjson


@dataclass(frozen=True)
class Reject:
    """One record that could not be used: where it came from, why, and its raw bytes or value."""

    source: str  # path relative to the input root
    loc: int  # 1-based line (text formats) or row (columnar formats); 0 when unknown
    reason: str  # short stable key, e.g. "malformed_json", "invalid_utf8", "missing_field"
    detail: str = ""  # human sentence: what, where, how to fix
    raw: Any = None  # the raw record: str, bytes (stored base64), or a JSON-able value

    def to_json(self) -> bytes:
        raw = self.raw
        doc: dict[str, Any] = {"source": self.source, "loc": self.loc, "reason": self.reason, "detail": self.detail}
        if isinstance(raw, (bytes, bytearray)):
            try:
                doc["raw"] = bytes(raw).decode("utf-8")
            except UnicodeDecodeError:
                doc["raw_b64"] = base64.b64encode(bytes(raw)).decode("ascii")
        else:
            doc["raw"] = raw
        return orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS, default=str)


def write_rejects(rejects: Iterable[Reject], fh: IO[bytes]) -> int:
    n = 0
    for r in rejects:
        fh.write(r.to_json() + b"\n")
        n += 1
    return n


@dataclass
class Stats:
    """Counts of one unit or of a whole run. Add two with ``+``."""

    input: int = 0
    kept: int = 0
    filtered: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    bytes_in: int = 0
    tokens: int = 0
    extra: Counter = field(default_factory=Counter)  # track-specific counters (truncations, ...)

    def reject(self, reason: str, n: int = 1) -> None:
        self.rejected[reason] += n

    def filter(self, reason: str, n: int = 1) -> None:
        self.filtered[reason] += n

    def __add__(self, other: Stats) -> Stats:
        return Stats(
            input=self.input + other.input,
            kept=self.kept + other.kept,
            filtered=self.filtered + other.filtered,
            rejected=self.rejected + other.rejected,
            bytes_in=self.bytes_in + other.bytes_in,
            tokens=self.tokens + other.tokens,
            extra=self.extra + other.extra,
        )

    @property
    def balanced(self) -> bool:
        return self.input == self.kept + sum(self.filtered.values()) + sum(self.rejected.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "kept": self.kept,
            "filtered": dict(sorted(self.filtered.items())),
            "rejected": dict(sorted(self.rejected.items())),
            "bytes_in": self.bytes_in,
            "tokens": self.tokens,
            "extra": dict(sorted(self.extra.items())),
            "balanced": self.balanced,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Stats:
        return cls(
            input=d["input"],
            kept=d["kept"],
            filtered=Counter(d.get("filtered", {})),
            rejected=Counter(d.get("rejected", {})),
            bytes_in=d.get("bytes_in", 0),
            tokens=d.get("tokens", 0),
            extra=Counter(d.get("extra", {})),
        )

    def identity_line(self) -> str:
        """``input = kept + filtered (...) + rejected (...)``, as printed at the end of a run."""
        f = sum(self.filtered.values())
        r = sum(self.rejected.values())
        fr = ", ".join(f"{k} {v}" for k, v in sorted(self.filtered.items())) or "none"
        rr = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items())) or "none"
        ok = "" if self.balanced else "  (UNBALANCED)"
        return f"input {self.input} = kept {self.kept} + filtered {f} ({fr}) + rejected {r} ({rr}){ok}"
