"""Gopher's quality and repetition rules (Rae et al. 2021, "Scaling Language Models", Table A1), with the
defaults and rule order of datatrove's ``GopherQualityFilter`` and ``GopherRepetitionFilter``.

Every statistic is computed for the whole batch at once (:mod:`.text`); the one Python loop is the greedy
scan of duplicated 5..10-grams in :func:`.ngrams.duplicate_chars`, which visits only the n-gram positions
that repeat an earlier one (none in most documents).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.curate.filters.heuristics import ngrams
from tokenmill.curate.filters.heuristics.rules import above, below, check_number, first_rule
from tokenmill.curate.filters.heuristics.text import (
    WS,
    Words,
    count,
    duplicates,
    ratio,
    split_newline_runs,
    splitlines,
    strip,
    text_column,
    words,
)
from tokenmill.steps.contract import Scored

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
BULLET_LINE = rf"^[{WS}]*[•\-]"
ELLIPSIS_LINE = rf"(?:\.\.\.|…)[{WS}]*$"


@dataclass(frozen=True)
class GopherQuality:
    """Rules, in order: ``short_doc``, ``long_doc`` (non-symbol words), ``below_avg_word_length``,
    ``above_avg_word_length``, ``too_many_hashes``, ``too_many_ellipsis`` (per word), ``too_many_bullets``,
    ``too_many_end_ellipsis`` (per line), ``below_alpha_words``, ``few_stop_words``."""

    min_doc_words: int | None = 50
    max_doc_words: int | None = 100_000
    min_avg_word_length: float | None = 3
    max_avg_word_length: float | None = 10
    max_symbol_word_ratio: float | None = 0.1
    max_bullet_lines_ratio: float | None = 0.9
    max_ellipsis_lines_ratio: float | None = 0.3
    min_alpha_words_ratio: float | None = 0.8
    min_stop_words: int | None = 2
    stop_words: tuple[str, ...] = STOP_WORDS
    name: ClassVar[str] = "gopher_quality"
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ("min_doc_words", "max_doc_words", "min_avg_word_length",
                                        "max_avg_word_length", "max_symbol_word_ratio", "max_bullet_lines_ratio",
                                        "max_ellipsis_lines_ratio", "min_alpha_words_ratio", "min_stop_words")

    def __post_init__(self) -> None:
        for key in ("min_doc_words", "max_doc_words", "min_stop_words"):
            check_number(self, key, low=0, whole=True)
        for key in ("min_avg_word_length", "max_avg_word_length", "max_symbol_word_ratio"):
            check_number(self, key, low=0)
        for key in ("max_bullet_lines_ratio", "max_ellipsis_lines_ratio", "min_alpha_words_ratio"):
            check_number(self, key, low=0, high=1)
        if isinstance(self.stop_words, str) or not all(isinstance(w, str) for w in self.stop_words):
            raise ValueError(f"{self.name}.stop_words: expected a list of words, got {self.stop_words!r}")
        object.__setattr__(self, "stop_words", tuple(self.stop_words))

    def setup(self) -> None:
        pass

    def score(self, batch: pa.RecordBatch) -> Scored:
        text = text_column(batch)
        w = words(text)
        n_words = w.counts
        plain = ~w.symbol
        n_plain = np.bincount(w.parents, weights=plain, minlength=len(text)).astype(np.int64)
        plain_chars = np.bincount(w.parents, weights=np.where(plain, w.lengths, 0), minlength=len(text))
        lines = splitlines(text)
        alpha = w.per_row(w.match(r"\pL"))
        return Scored({
            "words": n_words,
            "non_symbol_words": n_plain,
            "avg_word_length": ratio(plain_chars, n_plain),
            "hash_ratio": ratio(count(text, "#"), n_words),
            "ellipsis_ratio": ratio(count(text, "...") + count(text, "…"), n_words),
            "bullet_lines_ratio": ratio(lines.per_row(lines.match(BULLET_LINE)), lines.counts),
            "ellipsis_lines_ratio": ratio(lines.per_row(lines.match(ELLIPSIS_LINE)), lines.counts),
            "alpha_words_ratio": ratio(alpha, n_words),
            "stop_words": self._stop_words(w),
        })

    def _stop_words(self, w: Words) -> np.ndarray:
        """Distinct stop words (exact, case-sensitive match of a whole word) per document, looked up once per
        distinct word."""
        n_rows = len(w.counts)
        stop = pa.array(self.stop_words, pa.large_string())
        if w.firsts is None:  # words assembled without their first occurrences: every word looked up
            idx = np.asarray(pc.index_in(w.values, value_set=stop).fill_null(-1), dtype=np.int64)
        else:
            idx = np.asarray(pc.index_in(w.distinct(), value_set=stop).fill_null(-1), dtype=np.int64)[w.ids]
        hit = idx >= 0
        if not hit.any():
            return np.zeros(n_rows, dtype=np.int64)
        key = w.parents[hit] * len(self.stop_words) + idx[hit]
        return np.bincount(np.unique(key) // len(self.stop_words), minlength=n_rows).astype(np.int64)

    def checks(self, scores: Mapping[str, np.ndarray]) -> list[tuple[str, np.ndarray | None]]:
        """Every rule with its mask (``None``: disabled), in decision order."""
        s = {k: np.asarray(v) for k, v in scores.items()}
        return [
            ("short_doc", below(s["non_symbol_words"], self.min_doc_words)),
            ("long_doc", above(s["non_symbol_words"], self.max_doc_words)),
            ("below_avg_word_length", below(s["avg_word_length"], self.min_avg_word_length)),
            ("above_avg_word_length", above(s["avg_word_length"], self.max_avg_word_length)),
            ("too_many_hashes", above(s["hash_ratio"], self.max_symbol_word_ratio)),
            ("too_many_ellipsis", above(s["ellipsis_ratio"], self.max_symbol_word_ratio)),
            ("too_many_bullets", above(s["bullet_lines_ratio"], self.max_bullet_lines_ratio)),
            ("too_many_end_ellipsis", above(s["ellipsis_lines_ratio"], self.max_ellipsis_lines_ratio)),
            ("below_alpha_words", below(s["alpha_words_ratio"], self.min_alpha_words_ratio)),
            ("few_stop_words", below(s["stop_words"], self.min_stop_words)),
        ]

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return first_rule(len(next(iter(scores.values()))), self.checks(scores))



TOP_N_GRAMS = ((2, 0.2), (3, 0.18), (4, 0.16))
DUP_N_GRAMS = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))


@dataclass(frozen=True)
class GopherRepetition:
    """Rules, in order: ``empty``, ``dup_para_frac``, ``dup_para_char_frac``, ``dup_line_frac``,
    ``dup_line_char_frac``, ``top_<n>_gram`` for each ``(n, max)`` of ``top_n_grams``,
    ``duplicated_<n>_n_grams`` for each ``(n, max)`` of ``dup_n_grams``. The ``n`` are statistic parameters
    (changing them means scoring again); the fractions are thresholds."""

    dup_line_frac: float | None = 0.3
    dup_para_frac: float | None = 0.3
    dup_line_char_frac: float | None = 0.2
    dup_para_char_frac: float | None = 0.2
    top_n_grams: tuple[tuple[int, float], ...] = TOP_N_GRAMS
    dup_n_grams: tuple[tuple[int, float], ...] = DUP_N_GRAMS
    name: ClassVar[str] = "gopher_repetition"
    version: ClassVar[int] = 1
    # the n-gram lists pair statistic parameters (n) with thresholds: changing them means scoring again
    decision_params: ClassVar[tuple] = ("dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac")

    def __post_init__(self) -> None:
        for key in ("dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac"):
            check_number(self, key, low=0, high=1)
        for key in ("top_n_grams", "dup_n_grams"):
            object.__setattr__(self, key, _pairs(self, key))

    def setup(self) -> None:
        pass

    def score(self, batch: pa.RecordBatch) -> Scored:
        text = text_column(batch)
        chars = np.asarray(pc.utf8_length(text), dtype=np.int64)
        paras = split_newline_runs(strip(text), 2)
        para_dups, para_dup_chars = duplicates(paras)
        lines = split_newline_runs(text)
        line_dups, line_dup_chars = duplicates(lines)
        scores = {
            "chars": chars,
            "dup_para_frac": ratio(para_dups, paras.counts),
            "dup_para_char_frac": ratio(para_dup_chars, chars),
            "dup_line_frac": ratio(line_dups, lines.counts),
            "dup_line_char_frac": ratio(line_dup_chars, chars),
        }
        w = words(text)
        top, dup = dict(self.top_n_grams), dict(self.dup_n_grams)
        found = {}
        for n, grams in ngrams.iter_grams(w, sorted(top.keys() | dup.keys())):  # one size's n-grams alive at a time
            if n in top:
                found[f"top_{n}_gram_char_frac"] = ratio(ngrams.top_chars(w, grams), chars)
            if n in dup:
                found[f"dup_{n}_gram_char_frac"] = ratio(ngrams.duplicate_chars(w, grams), chars)
            del grams
        scores |= {f"top_{n}_gram_char_frac": found[f"top_{n}_gram_char_frac"] for n, _ in self.top_n_grams}
        scores |= {f"dup_{n}_gram_char_frac": found[f"dup_{n}_gram_char_frac"] for n, _ in self.dup_n_grams}
        return Scored(scores)

    def checks(self, scores: Mapping[str, np.ndarray]) -> list[tuple[str, np.ndarray | None]]:
        """Every rule with its mask (``None``: disabled), in decision order."""
        s = {k: np.asarray(v) for k, v in scores.items()}
        checks = [
            ("empty", s["chars"] == 0),
            ("dup_para_frac", above(s["dup_para_frac"], self.dup_para_frac)),
            ("dup_para_char_frac", above(s["dup_para_char_frac"], self.dup_para_char_frac)),
            ("dup_line_frac", above(s["dup_line_frac"], self.dup_line_frac)),
            ("dup_line_char_frac", above(s["dup_line_char_frac"], self.dup_line_char_frac)),
        ]
        checks += [(f"top_{n}_gram", above(s[f"top_{n}_gram_char_frac"], frac)) for n, frac in self.top_n_grams]
        checks += [(f"duplicated_{n}_n_grams", above(s[f"dup_{n}_gram_char_frac"], frac)) for n, frac in self.dup_n_grams]
        return checks

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return first_rule(len(next(iter(scores.values()))), self.checks(scores))



def _pairs(step, key: str) -> tuple[tuple[int, float], ...]:
    value = getattr(step, key)
    try:
        pairs = tuple((int(n), float(f)) for n, f in value)
    except (TypeError, ValueError):
        raise ValueError(f"{step.name}.{key}: expected a list of [n, max_fraction] pairs, got {value!r}") from None
    if any(n < 1 or not 0 <= f <= 1 for n, f in pairs):
        raise ValueError(f"{step.name}.{key}: n must be >= 1 and each fraction in [0, 1], got {value!r}")
    return pairs
