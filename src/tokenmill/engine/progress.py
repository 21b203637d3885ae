"""Progress on stderr: units, documents, bytes, rate and ETA.

In a terminal, one line redrawn in place after every finished unit. Elsewhere (a batch job's log file, a
pipe) a plain line at the first finished unit after every ``TOKENMILL_PROGRESS_EVERY`` seconds (default
30), and a last one at the end of a run that lasted that long, so a log is never silent until the end.
``enabled=False`` (``--no-progress``) prints nothing; ``enabled=True`` forces the terminal style.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenmill.engine.stage import UnitResult

DEFAULT_EVERY = 30.0


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} TB"


def log_interval() -> float:
    """Seconds between two progress lines in a log: ``$TOKENMILL_PROGRESS_EVERY`` or 30."""
    try:
        return max(0.0, float(os.environ.get("TOKENMILL_PROGRESS_EVERY", DEFAULT_EVERY)))
    except ValueError:
        return DEFAULT_EVERY


class Progress:
    """Updated once per finished unit from the unit's :class:`UnitResult` (``stats.input``, ``stats.bytes_in``)."""

    def __init__(self, *, total_units: int, total_bytes: int, enabled: bool | None = None):
        tty = sys.stderr.isatty()
        self.mode = "off" if enabled is False else "bar" if (enabled or tty) else "log"
        self.enabled = self.mode != "off"
        self.every = log_interval()
        self.total_units, self.total_bytes = total_units, total_bytes
        self.units = self.docs = self.bytes = 0
        self.start = self.last_line = time.monotonic()
        self.skipped_bytes = 0
        self.logged_units = -1

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
        if self.mode == "bar":
            print(f"\r{self._status()}   ", end="", file=sys.stderr, flush=True)
        elif self.mode == "log" and time.monotonic() - self.last_line >= self.every:
            self._log_line()

    def _status(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-6)
        rate = (self.bytes - self.skipped_bytes) / elapsed
        left = max(self.total_bytes - self.bytes, 0)
        eta = f"{left / rate:.0f}s" if rate > 0 else "?"
        return (f"[{self.units}/{self.total_units} units] {self.docs:,} docs  {_human(self.bytes)}"
                f"  {_human(rate)}/s  ETA {eta}")

    def _log_line(self) -> None:
        elapsed = time.monotonic() - self.start
        print(f"progress {elapsed:.0f}s: {self._status()}", file=sys.stderr, flush=True)
        self.last_line, self.logged_units = time.monotonic(), self.units

    def close(self) -> None:
        if self.mode == "bar" and self.units:
            print(file=sys.stderr)
        elif (self.mode == "log" and self.units and self.logged_units != self.units
              and time.monotonic() - self.start >= self.every):  # a run shorter than one interval stays quiet
            self._log_line()
