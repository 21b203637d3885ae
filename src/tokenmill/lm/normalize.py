"""The words an n-gram model counts and scores: one normalisation, used by ``lm train`` and the ``perplexity`` step.

CCNet-style (Wenzek et al. 2020, ``cc_net/text_normalizer.py``), over words instead of SentencePiece pieces:

1. Unicode NFKC (full-width and compatibility forms folded: ``ｆｕｌｌ`` -> ``full``, ``ﬁ`` -> ``fi``);
2. lowercase;
3. every decimal digit (any script) -> ``0`` (``1999`` and ``2024`` are one word, ``0000``);
4. split into words: runs of word characters (``\\w``: letters, marks, digits, underscore), and each other
   non-space character as a word of its own (punctuation is kept, one character a word: ``end.`` -> ``end``,
   ``.``); whitespace separates and is dropped.

Accents are kept (CCNet strips them; stripping combining marks would mangle scripts written with them).
A document's lines are its sentences: each non-empty line is scored with ``<s>`` before and ``</s>`` after,
as CCNet scores a document line by line. A word never holds whitespace, so a sentence written as its words
joined by single spaces is what KenLM's query module reads back (``kenlm.Model.score``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

VERSION = 1  # bumped whenever the normalisation changes: a model records it, the step checks it
_DIGIT = re.compile(r"\d")
_WORD = re.compile(r"\w+|[^\w\s]")


def normalize(text: str) -> str:
    """NFKC, lowercase, digits -> 0 (steps 1-3 of the module docstring)."""
    return _DIGIT.sub("0", unicodedata.normalize("NFKC", text).lower())


def sentences(text: str) -> Iterator[list[str]]:
    """The words of each non-empty line of ``text`` (a line without a word is skipped)."""
    for line in normalize(text).splitlines():
        words = _WORD.findall(line)
        if words:
            yield words


def describe() -> dict:
    """What the model's manifest records of the normalisation."""
    return {"version": VERSION, "unicode": "NFKC", "case": "lower", "digits": "0",
            "words": r"\w+ runs; each other non-space character a word", "sentence": "one per non-empty line"}
