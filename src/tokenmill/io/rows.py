"""Collect rows, their locations and rejects into RawBatch objects of bounded size."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tokenmill.base.accounting import Reject
from tokenmill.io.base import RawBatch


class RowBatcher:
    """Accumulates one batch; ``full`` says when to ``take`` it. Rejects count toward the size bound."""

    def __init__(self, source: str, *, batch_rows: int, columns: list[str] | None = None):
        self.source = source
        self.batch_rows = max(1, batch_rows)
        self.columns = columns
        self.skipped: Counter = Counter()
        self._reset()

    def _reset(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.locs: list[int] = []
        self.rejects: list[Reject] = []
        self.nbytes = 0

    def add(self, row: dict[str, Any], loc: int) -> None:
        if self.columns is not None:
            row = {k: row[k] for k in self.columns if k in row}
        self.rows.append(row)
        self.locs.append(loc)

    def reject(self, loc: int, reason: str, detail: str, raw: Any = None) -> None:
        self.rejects.append(Reject(source=self.source, loc=loc, reason=reason, detail=detail, raw=raw))

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    @property
    def full(self) -> bool:
        return len(self.rows) + len(self.rejects) >= self.batch_rows

    @property
    def empty(self) -> bool:
        return not (self.rows or self.rejects or self.skipped or self.nbytes)

    def take(self) -> RawBatch:
        batch = RawBatch(
            source=self.source,
            locs=self.locs,
            rows=self.rows,
            rejects=self.rejects,
            nbytes=self.nbytes,
            skipped=dict(self.skipped),
        )
        self._reset()
        self.skipped = Counter()
        return batch
