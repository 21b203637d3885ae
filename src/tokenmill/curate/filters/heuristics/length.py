"""``length``: documents whose text is shorter or longer than a number of characters (code points)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.curate.filters.heuristics.rules import above, below, check_number, first_rule
from tokenmill.curate.filters.heuristics.text import text_column
from tokenmill.steps.contract import Scored


@dataclass(frozen=True)
class Length:
    """Statistic ``chars``: Unicode code points of ``text``. Rules ``too_short`` (``chars < min_chars``),
    ``too_long`` (``chars > max_chars``); ``None`` disables a rule."""

    min_chars: int | None = 0
    max_chars: int | None = None
    name: ClassVar[str] = "length"
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ("min_chars", "max_chars")

    def __post_init__(self) -> None:
        check_number(self, "min_chars", low=0, whole=True)
        check_number(self, "max_chars", low=0, whole=True)

    def setup(self) -> None:
        pass

    def score(self, batch: pa.RecordBatch) -> Scored:
        return Scored({"chars": np.asarray(pc.utf8_length(text_column(batch)), dtype=np.int64)})

    def checks(self, scores: Mapping[str, np.ndarray]) -> list[tuple[str, np.ndarray | None]]:
        """Every rule with its mask (``None``: disabled), in decision order."""
        chars = np.asarray(scores["chars"])
        return [("too_short", below(chars, self.min_chars)), ("too_long", above(chars, self.max_chars))]

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return first_rule(len(next(iter(scores.values()))), self.checks(scores))
