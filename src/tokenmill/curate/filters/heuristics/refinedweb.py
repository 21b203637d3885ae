"""``refinedweb``: the line corrections and word-removal rule of DCLM's RefinedWeb reproduction (Li et al.
2024, "DataComp-LM", appendix; ``baselines/baselines_configs/refinedweb.yaml``), a modifier.

DCLM's page rules of the same pipeline (page length, word length, symbol ratio, bullets, ellipsis lines,
alphabetic words, stop words, repetition) are ``gopher_quality`` and ``gopher_repetition``; the ``refinedweb``
preset runs those first. This step does the rest, in DCLM's order, on the lines of each document
(``\\n``-separated, judged on their own text):

1. runs of 3+ ``\\n`` become ``\\n\\n``;
2. a line whose upper-case letters are more than ``max_uppercase_ratio`` of its characters is dropped;
3. a line whose digits are more than ``max_numeric_ratio`` of its characters is dropped (all digits);
4. a counter line (``12 likes``, ``3.4k views``, ...) is dropped;
5. a non-empty line of fewer than ``min_line_words`` words is dropped;
6. in lines of at most 10 words: ``items in cart`` is removed, ``Read more...`` at the end is removed,
   ``Sign-in`` at the start is removed (any case); a line left blank by this is dropped.

The kept lines, joined by ``\\n`` and stripped, are the new text. Rules: ``empty`` (no word before, or no
text after), ``word_removal_ratio`` (share of words removed ``> max_removed_ratio``). Words are tokenmill's
words that begin with a letter or digit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.curate.filters.heuristics.rules import above, check_bool, check_number, first_rule
from tokenmill.curate.filters.heuristics.text import (
    WS,
    Pieces,
    Words,
    join_lines,
    ratio,
    split_at,
    split_words,
    text_column,
    words,
)
from tokenmill.steps.contract import Scored

COUNTER = (r"(?i)^\W*\d(?:,|\.|\d)*(?:K|k|M|m|B|b)?\s+(?:likes|shares|comments|retweets|reposts|quotes|bookmarks"
           r"|upvotes|downvotes|downloads|views|followers)\W*$")
SUBSTRINGS = ((rf"(?i)[{WS}]?items in cart", "items_in_cart"), (rf"(?i)[{WS}]?read more\.\.\.$", "read_more"),
              (rf"(?i)^sign-in[{WS}]?", "sign_in"))


@dataclass(frozen=True)
class RefinedWeb:
    max_uppercase_ratio: float | None = 0.5
    max_numeric_ratio: float | None = 0.999999
    remove_counters: bool = True
    min_line_words: int | None = 2
    remove_substrings: bool = True
    max_removed_ratio: float | None = 0.05
    name: ClassVar[str] = "refinedweb"
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ("max_removed_ratio",)  # the line rules rewrite the text: scoring again

    def __post_init__(self) -> None:
        for key in ("max_uppercase_ratio", "max_numeric_ratio", "max_removed_ratio"):
            check_number(self, key, low=0, high=1)
        check_number(self, "min_line_words", low=0, whole=True)
        check_bool(self, "remove_counters", "remove_substrings")

    def setup(self) -> None:
        pass

    def score(self, batch: pa.RecordBatch) -> Scored:
        original = text_column(batch)
        text = pc.replace_substring_regex(original, r"\n{3,}", "\n\n")
        before = _alnum_words(words(original))  # whitespace runs shortened: the same words (and cached)
        lines = split_at(text, "\n")
        values, drop, counts = self._line_rules(lines)
        new_text = join_lines(Pieces(values, lines.parents, lines.counts).where(~drop))
        after = before - _words_removed(lines, values, drop)
        return Scored({
            "words_before": before,
            "words_after": after,
            "word_removal_ratio": ratio(before - after, before),
            "chars_after": np.asarray(pc.utf8_length(new_text), dtype=np.int64),
        }, text=new_text, counts=counts)

    def _line_rules(self, lines: Pieces) -> tuple[pa.Array, np.ndarray, Counter]:
        values = lines.values
        length = lines.lengths()
        nonempty = length > 0
        rules: dict[str, np.ndarray] = {}
        if self.max_uppercase_ratio is not None:
            upper = np.asarray(pc.count_substring_regex(values, r"\p{Lu}"), dtype=np.int64)
            rules["uppercase"] = nonempty & (ratio(upper, length) > self.max_uppercase_ratio)
        if self.max_numeric_ratio is not None:
            digits = np.asarray(pc.count_substring_regex(values, r"\p{Nd}"), dtype=np.int64)
            rules["numeric"] = nonempty & (ratio(digits, length) > self.max_numeric_ratio)
        if self.remove_counters:
            rules["counter"] = np.asarray(pc.match_substring_regex(values, COUNTER), dtype=bool)
        n_words = _word_counts(values)
        if self.min_line_words is not None:
            rules["too_few_words"] = nonempty & (n_words < self.min_line_words)
        drop = np.zeros(len(values), dtype=bool)
        counts: Counter = Counter()
        for rule, mask in rules.items():
            counts[f"line_{rule}"] = int((mask & ~drop).sum())
            drop |= mask
        if self.remove_substrings:
            values, drop = _substrings(values, drop, counts, n_words)
        return values, drop, +counts

    def checks(self, scores: Mapping[str, np.ndarray]) -> list[tuple[str, np.ndarray | None]]:
        """Every rule with its mask (``None``: disabled), in decision order."""
        s = {k: np.asarray(v) for k, v in scores.items()}
        return [
            ("empty", (s["words_before"] == 0) | (s["chars_after"] == 0)),
            ("word_removal_ratio", above(s["word_removal_ratio"], self.max_removed_ratio)),
        ]

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return first_rule(len(next(iter(scores.values()))), self.checks(scores))



def _substrings(values: pa.Array, drop: np.ndarray, counts: Counter, n_words: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """The substring rules, in order, on the kept lines of at most 10 words (``n_words``: each line's
    whitespace-separated words before the rules). A rule only removes characters, which never splits a word,
    so a line it edits still has at most 10 words: the counts need no update between the rules."""
    for pattern, rule in SUBSTRINGS:
        short = np.flatnonzero(~drop & (n_words <= 10))
        sub = values.take(pa.array(short))
        new = pc.replace_substring_regex(sub, pattern, "")
        hit = ~np.asarray(pc.equal(new, sub), dtype=bool)
        if not hit.any():
            continue
        new = new.filter(pa.array(hit))
        changed = np.zeros(len(values), dtype=bool)
        changed[short[hit]] = True
        counts[f"line_{rule}"] += int(hit.sum())
        values = pc.replace_with_mask(values, pa.array(changed), new.cast(values.type))
        drop = drop.copy()
        drop[short[hit]] |= np.asarray(pc.utf8_length(pc.utf8_trim_whitespace(new)), dtype=np.int64) == 0
    return values, drop


def _word_counts(values: pa.Array) -> np.ndarray:
    """Whitespace-separated words of each value (``str.split()``)."""
    return np.asarray(pc.list_value_length(pc.utf8_split_whitespace(values)).fill_null(0), dtype=np.int64)


def _alnum_words(w: Words) -> np.ndarray:
    """Per row: the words that begin with a letter or digit."""
    starts = w.match(r"^[\pL\pN]")
    return np.bincount(w.parents, weights=starts, minlength=len(w.counts)).astype(np.int64)


def _words_removed(lines: Pieces, values: pa.Array, drop: np.ndarray) -> np.ndarray:
    """Per document: its words (letter or digit first) minus those of the new text, split only where lines changed.

    A text's words are its whitespace chunks' words in order (:func:`.text.split_words` works chunk by chunk)
    and ``\\n`` is whitespace, so a document's words are the concatenation of its lines' words, and those of
    the new text the concatenation of its kept lines'. The difference is therefore the words of the dropped
    lines and of the lines a substring rule edited (before the edit) less those of the edited kept lines
    (after it): two splits over those few lines instead of two over every text.
    """
    edited = ~np.asarray(pc.fill_null(pc.equal(values, lines.values), False), dtype=bool)
    gone = drop | edited
    out = np.zeros(lines.n_rows, dtype=np.int64)
    if gone.any():
        idx = np.flatnonzero(gone)
        out += np.bincount(lines.parents[idx], weights=_alnum_words(split_words(lines.values.take(pa.array(idx)))),
                           minlength=lines.n_rows).astype(np.int64)
    back = edited & ~drop
    if back.any():
        idx = np.flatnonzero(back)
        out -= np.bincount(lines.parents[idx], weights=_alnum_words(split_words(values.take(pa.array(idx)))),
                           minlength=lines.n_rows).astype(np.int64)
    return out
