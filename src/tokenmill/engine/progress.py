"""A one-line progress bar on stderr: units, documents, bytes, rate and ETA."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenmill.engine.stage import UnitResult


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} TB"


class Progress:
    """Updated once per finished unit from the unit's :class:`UnitResult` (``stats.input``, ``stats.bytes_in``)."""

    def __init__(self, *, total_units: int, total_bytes: int, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total_units, self.total_bytes = total_units, total_bytes
        self.units = self.docs = self.bytes = 0
        self.start = time.monotonic()
        self.skipped_bytes = 0

    def skip(self, n_units: int, results: list[UnitResult]) -> None:
        for r in results:
            self._count(r)
        self.skipped_bytes = self.bytes
        if n_units and self.enabled:
            print(f"resuming: {n_units} of {self.total_units} units already done", file=sys.stderr)

    def _count(self, result: UnitResult) -> None:
        self.units += 1
        self.docs += result.stats.input
        self.bytes += result.stats.bytes_in

    def update(self, result: UnitResult) -> None:
        self._count(result)
        if not self.enabled:
            return
        elapsed = max(time.monotonic() - self.start, 1e-6)
        rate = (self.bytes - self.skipped_bytes) / elapsed
        left = max(self.total_bytes - self.bytes, 0)
        eta = f"{left / rate:.0f}s" if rate > 0 else "?"
        line = (
            f"\r[{self.units}/{self.total_units} units] {self.docs:,} docs  {_human(self.bytes)}"
            f"  {_human(rate)}/s  ETA {eta}   "
        )
        print(line, end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled and self.units:
            print(file=sys.stderr)
