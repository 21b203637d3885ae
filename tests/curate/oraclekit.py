"""The straightforward implementations the heuristic steps' fast paths replaced, kept as their oracles.

Each function here is the code as it stood before a speed-up, verbatim but for names; the equivalence tests
(``test_fast_paths.py``) compare the shipped steps against them value for value, float bits included.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.curate.heuristics.refinedweb import RefinedWeb
from tokenmill.curate.heuristics.text import Pieces, join_lines, ratio, split, split_words, text_column
from tokenmill.curate.step import Scored


def alnum_words(text: pa.Array) -> np.ndarray:
    w = split_words(text)
    starts = np.asarray(pc.match_substring_regex(w.values, r"^[\pL\pN]"), dtype=bool)
    return np.bincount(w.parents, weights=starts, minlength=len(text)).astype(np.int64)


def refinedweb_score(step: RefinedWeb, batch: pa.RecordBatch) -> Scored:
    """``RefinedWeb.score`` splitting the words of the whole text before and after the line rules."""
    text = pc.replace_substring_regex(text_column(batch), r"\n{3,}", "\n\n")
    before = alnum_words(text)
    lines = split(text, "\n")
    values, drop, counts = step._line_rules(lines)
    new_text = join_lines(Pieces(values, lines.parents, lines.counts).where(~drop))
    after = alnum_words(new_text)
    return Scored({
        "words_before": before,
        "words_after": after,
        "word_removal_ratio": ratio(before - after, before),
        "chars_after": np.asarray(pc.utf8_length(new_text), dtype=np.int64),
    }, text=new_text, counts=counts)
