"""Per-unit rejects files, merged in unit order into ``<out>/rejects.jsonl`` at the end of a run.

Each line: ``{"source": <path relative to the input root>, "loc": <1-based line or row>, "reason": <key>,
"detail": <sentence>, "raw": <the record as read>}`` (``raw_b64`` instead of ``raw`` for bytes that are
not UTF-8).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Protocol

from tokenmill.base.accounting import Reject, Stats

UNIT_DIR = Path("_state") / "rejects"


class Named(Protocol):
    """What a rejects file is named after: a work unit, an engine ``Unit``."""

    @property
    def name(self) -> str: ...


class RejectSink:
    """Counts rejects into a unit's ``Stats`` and writes them to the unit's staging area.

    ``unit`` is anything with a ``name`` (a work unit, an engine ``Unit``): the rejects file is named after it.
    The file is created with the unit's first reject: a unit that rejects nothing writes no file (readers
    take a missing file for no rejects), so clean input costs no file per unit.
    """

    def __init__(self, staging: Path, unit: Named):
        self.path = staging / UNIT_DIR / f"{unit.name}.jsonl"
        self._fh: IO[bytes] | None = None

    def add(self, rejects: Iterable[Reject], stats: Stats) -> None:
        for r in rejects:
            stats.reject(r.reason)
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "wb")
            self._fh.write(r.to_json() + b"\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def merge_rejects(out: Path, unit_names: list[str]) -> int:
    """Concatenate the units' rejects into ``out/rejects.jsonl``; return the number of lines."""
    target = out / "rejects.jsonl"
    tmp = target.with_name("rejects.jsonl.tmp")
    lines = 0
    with open(tmp, "wb") as dst:
        for name in unit_names:
            part = out / UNIT_DIR / f"{name}.jsonl"
            if part.exists():
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, dst)
                lines += sum(1 for _ in open(part, "rb"))
    tmp.replace(target)
    return lines
