"""FineWeb's quality rules (Penedo et al. 2024, "The FineWeb Datasets"), with the defaults and rule order
of datatrove's ``FineWebQualityFilter``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.curate.filters.heuristics.rules import above, check_bool, check_number, first_rule
from tokenmill.curate.filters.heuristics.text import STERM, count, count_words, duplicates, ratio, split, strip, text_column
from tokenmill.steps.contract import Scored


@dataclass(frozen=True)
class FineWeb:
    """Lines are the ``\\n``-separated pieces that are not blank. Rules, in order: ``empty`` (no line),
    ``line_punct_ratio`` (share of lines ending in a stop character ``< line_punct_thr``),
    ``short_line_ratio`` (share of lines of at most ``short_line_length`` characters ``> short_line_thr``),
    ``char_dup_ratio`` (characters of lines repeating an earlier line, over the characters that are not
    ``\\n``, ``> char_duplicates_ratio``), ``list_ratio`` (``\\n`` per word ``> new_line_ratio``).
    ``stop_chars`` (default: Unicode Sentence_Terminal) and ``short_line_length`` are statistic parameters."""

    line_punct_thr: float | None = 0.12
    line_punct_exclude_zero: bool = False
    stop_chars: tuple[str, ...] | None = None
    short_line_thr: float | None = 0.67
    short_line_length: int = 30
    char_duplicates_ratio: float | None = 0.01
    new_line_ratio: float | None = 0.3
    name: ClassVar[str] = "fineweb"
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ("line_punct_thr", "line_punct_exclude_zero", "short_line_thr",
                                           "char_duplicates_ratio", "new_line_ratio")

    def __post_init__(self) -> None:
        for key in ("line_punct_thr", "short_line_thr", "char_duplicates_ratio"):
            check_number(self, key, low=0, high=1)
        check_number(self, "new_line_ratio", low=0)
        check_number(self, "short_line_length", low=0, whole=True, optional=False)
        check_bool(self, "line_punct_exclude_zero")
        if self.stop_chars is not None:
            if isinstance(self.stop_chars, str) or not all(isinstance(c, str) and c for c in self.stop_chars):
                raise ValueError(f"{self.name}.stop_chars: expected a list of non-empty strings")
            object.__setattr__(self, "stop_chars", tuple(self.stop_chars))

    def setup(self) -> None:
        pass

    def _ends_with_stop(self) -> str:
        if self.stop_chars is None:
            return f"[{STERM}]$"
        return "(?:" + "|".join(re.escape(c) for c in self.stop_chars) + ")$"

    def score(self, batch: pa.RecordBatch) -> Scored:
        text = text_column(batch)
        pieces = split(text, "\n")
        lines = pieces.where(np.asarray(pc.utf8_length(strip(pieces.values)), dtype=np.int64) > 0)
        newlines = count(text, "\n")
        _, dup_chars = duplicates(lines)
        chars = np.asarray(pc.utf8_length(text), dtype=np.int64)
        return Scored({
            "lines": lines.counts,
            "line_punct_ratio": ratio(lines.per_row(lines.match(self._ends_with_stop())), lines.counts),
            "short_line_ratio": ratio(lines.per_row(lines.lengths() <= self.short_line_length), lines.counts),
            "char_dup_ratio": ratio(dup_chars, chars - newlines),
            "newline_ratio": ratio(newlines, count_words(text)),
        })

    def checks(self, scores: Mapping[str, np.ndarray]) -> list[tuple[str, np.ndarray | None]]:
        """Every rule with its mask (``None``: disabled), in decision order."""
        s = {k: np.asarray(v) for k, v in scores.items()}
        punct = None
        if self.line_punct_thr is not None:
            punct = s["line_punct_ratio"] < self.line_punct_thr
            if self.line_punct_exclude_zero:
                punct &= s["line_punct_ratio"] != 0
        return [
            ("empty", s["lines"] == 0),
            ("line_punct_ratio", punct),
            ("short_line_ratio", above(s["short_line_ratio"], self.short_line_thr)),
            ("char_dup_ratio", above(s["char_dup_ratio"], self.char_duplicates_ratio)),
            ("list_ratio", above(s["newline_ratio"], self.new_line_ratio)),
        ]

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return first_rule(len(next(iter(scores.values()))), self.checks(scores))
