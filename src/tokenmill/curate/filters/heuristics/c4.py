"""C4's rules (Raffel et al. 2020, section 2.2; TFDS ``c4_utils``), with the defaults and order of
datatrove's ``C4QualityFilter``: line rules first (a modifier: kept lines become the new text), then the
document rules, which read what the line rules left.

Per line (``str.splitlines``, stripped), in order: ``too_long_word`` (a whitespace-separated word longer
than ``max_word_length``) drops the line; citations (``[1]``, ``[edit]``, ``[citation needed]``) are
removed; ``no_terminal_punct`` (not ending in ``. ? ! " '``, or ending in ``...``) drops it; ``too_few_words``
(fewer than ``min_words_per_line`` words, counted before the citations went) drops it; ``lorem ipsum``
(any case) removes the document; ``javascript`` (any case) drops the line; ``{`` removes the document;
a policy phrase (``terms of use``, ``privacy policy``, ``cookie policy``, ``uses cookies``,
``use of cookies``, ``use cookies``) drops the line. The sentences of kept lines are counted;
``too_few_sentences`` removes a document with fewer than ``min_num_sentences``.

All line rules are statistic parameters (they decide the text the document rules read);
``min_num_sentences`` is the only pure threshold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.curate.filters.heuristics.rules import check_bool, check_number, first_rule
from tokenmill.curate.filters.heuristics.text import (
    ABBREVIATIONS,
    STERM,
    WS,
    Pieces,
    from_lists,
    join_lines,
    splitlines,
    strip,
    text_column,
)
from tokenmill.steps.contract import Scored

CITATION = r"\[\d*\]|\[edit\]|\[citation needed\]"
POLICY = r"(?i)terms of use|privacy policy|cookie policy|uses cookies|use of cookies|use cookies"
# A sentence ends at sentence terminals followed (after closing punctuation) by whitespace and a character
# that is not punctuation, or at a period between a lower-case and an upper-case letter: "Stop. Then" and
# "stop.Then" have two, "3.5 m" and "end." one. Runs of periods and "…" end no sentence, nor does the period
# of an abbreviation (a single capital "E.", letters with periods "J.C.", or a listed title "Dr.").
SENTENCE_BREAK = rf"[{STERM}]+\pP*[{WS}]+\pP*[^\pP{WS}]|\p{{Ll}}\.\p{{Lu}}"
_NOT_AN_END = (r"\.\.+|…", "\ue002")
_ABBREVIATION_PERIOD = (rf"(^|[{WS}\pP])(\pL(?:\.\pL)+|\p{{Lu}}|" + "|".join(ABBREVIATIONS) + r")\.",
                        "\\1\\2\ue002")


@dataclass(frozen=True)
class C4:
    remove_citations: bool = True
    filter_no_terminal_punct: bool = True
    min_num_sentences: int | None = 5
    min_words_per_line: int | None = 3
    max_word_length: int | None = 1000
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True
    name: ClassVar[str] = "c4"
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ("min_num_sentences",)  # the line rules rewrite the text: scoring again

    def __post_init__(self) -> None:
        for key in ("min_num_sentences", "min_words_per_line", "max_word_length"):
            if getattr(self, key) == -1:  # datatrove's spelling of "disabled"
                object.__setattr__(self, key, None)
            check_number(self, key, low=0, whole=True)
        check_bool(self, "remove_citations", "filter_no_terminal_punct", "filter_lorem_ipsum", "filter_javascript",
                   "filter_curly_bracket", "filter_policy")

    def setup(self) -> None:
        pass

    def score(self, batch: pa.RecordBatch) -> Scored:
        text = text_column(batch)
        lines = splitlines(text)
        stripped = strip(lines.values)
        words = from_lists(pc.utf8_split_whitespace(stripped))
        line = pc.replace_substring_regex(stripped, CITATION, "") if self.remove_citations else stripped
        rules = self._line_rules(lines, line, words)
        kept = Pieces(line, lines.parents, lines.counts).where(rules["kept"])
        counts = Counter({f"line_{k}": int(v.sum()) for k, v in rules.items() if k != "kept" and v.any()})
        sentences = kept.per_row(_sentences(kept.values))
        return Scored({
            "lines": lines.counts,
            "kept_lines": kept.counts,
            "lorem_ipsum_lines": lines.per_row(rules["lorem_ipsum"]).astype(np.int64),
            "curly_bracket_lines": lines.per_row(rules["curly_bracket"]).astype(np.int64),
            "sentences": sentences.astype(np.int64),
        }, text=join_lines(kept), counts=counts)

    def _line_rules(self, lines: Pieces, line: pa.Array, words: Pieces) -> dict[str, np.ndarray]:
        n = len(lines.parents)
        off = np.zeros(n, dtype=bool)
        too_long = off
        if self.max_word_length is not None:
            too_long = np.bincount(words.parents, weights=words.lengths() > self.max_word_length, minlength=n) > 0
        no_punct = off
        if self.filter_no_terminal_punct:
            ends = np.asarray(pc.match_substring_regex(line, r"[.?!\"']$"), dtype=bool)
            no_punct = ~ends | np.asarray(pc.ends_with(line, "..."), dtype=bool)
        few = off if self.min_words_per_line is None else words.counts < self.min_words_per_line
        alive = ~too_long & ~no_punct & ~few
        lorem = alive & self._has(line, "(?i)lorem ipsum", self.filter_lorem_ipsum)
        js = alive & ~lorem & self._has(line, "(?i)javascript", self.filter_javascript)
        curly = alive & ~lorem & ~js & self._has(line, r"\{", self.filter_curly_bracket)
        policy = alive & ~lorem & ~js & ~curly & self._has(line, POLICY, self.filter_policy)
        kept = alive & ~lorem & ~js & ~curly & ~policy
        return {"too_long_word": too_long, "no_terminal_punct": ~too_long & no_punct,
                "too_few_words": ~too_long & ~no_punct & few, "lorem_ipsum": lorem, "javascript": js,
                "curly_bracket": curly, "policy": policy, "kept": kept}

    @staticmethod
    def _has(line: pa.Array, pattern: str, enabled: bool) -> np.ndarray:
        if not enabled:
            return np.zeros(len(line), dtype=bool)
        return np.asarray(pc.match_substring_regex(line, pattern), dtype=bool)

    def checks(self, scores: Mapping[str, np.ndarray]) -> list[tuple[str, np.ndarray | None]]:
        """Every rule with its mask (``None``: disabled), in decision order."""
        s = {k: np.asarray(v) for k, v in scores.items()}
        few = None if self.min_num_sentences is None else s["sentences"] < self.min_num_sentences
        return [
            ("lorem_ipsum", s["lorem_ipsum_lines"] > 0),
            ("curly_bracket", s["curly_bracket_lines"] > 0),
            ("too_few_sentences", few),
        ]

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return first_rule(len(next(iter(scores.values()))), self.checks(scores))



def _sentences(lines: pa.Array) -> np.ndarray:
    """Sentences per line: one plus its sentence breaks."""
    for pattern, repl in (_NOT_AN_END, _ABBREVIATION_PERIOD):
        lines = pc.replace_substring_regex(lines, pattern, repl)
    return np.asarray(pc.count_substring_regex(lines, SENTENCE_BREAK), dtype=np.int64) + 1
