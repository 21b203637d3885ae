r"""``sft_quality``: heuristic rules for SFT examples, over the ``prompt`` and ``response`` columns that the
SFT track's step hook gives every conversation (user turns and assistant turns, flattened).

Statistics (ledger ``sft_quality.<stat>``) and rules (reason ``sft_quality_v2:<rule>``), in this order:

``empty_answer``       the response is empty, or only a placeholder (``N/A``, ``TODO``, ``...``, ``<noinput>``,
                       ``lorem ipsum``, ``[insert ...]``, ``your answer here``): statistic ``placeholder``.
``refusal``            the response refuses or carries assistant boilerplate ("As an AI language model",
                       "I'm sorry, but I cannot", "I can't assist with that"): statistic ``refusal``.
``cut_mid_sentence``   a response of at least ``min_chars_cut`` characters whose last non-space character
                       is a letter, digit, comma, colon, semicolon or hyphen (not a sentence end, a closing
                       bracket or quote, a code fence, a list item, or a final-answer line: GSM8K's
                       ``#### 72``, ``The answer is 72``, ``Final answer: 17.5``): statistic ``cut``. (v1
                       took final-answer lines for cuts: 97% of GSM8K's train set.)
``repeated_ngrams``    the share of the response's word 3-grams that occur more than once in it exceeds
                       ``max_dup_ngram_frac`` (responses of at least 30 words): statistic ``dup_ngram_frac``.
``language_mismatch``  both sides have at least ``min_chars_language`` letters and py3langid labels them
                       with different languages: statistics ``prompt_language``, ``response_language``.
                       Off with ``check_language: false``. This one is per-document Python (py3langid
                       classifies one string at a time), about 5,000 short texts per second per core.

Everything else is vectorised over the batch (Arrow regexes, numpy over n-gram hashes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill._extras import require
from tokenmill.curate import ngrams
from tokenmill.steps.contract import Scored

PLACEHOLDER = (r"^\s*(n/?a|none|null|todo|tbd|\.{3,}|…|-+|<no\s*input>|<noinput>|lorem ipsum.*|\[insert[^\]]*\]"
               r"|(your )?(answer|response|output) (goes )?here\.?|placeholder)\s*$")
REFUSAL = (r"(as an ai( language)? model|as a language model|i'?m sorry,? but i (can(no|')t|am unable|won'?t)"
           r"|i (cannot|can'?t|am unable to|won'?t) (assist|help|comply|provide|fulfill)|i'?m not able to (help|assist))")
CUT_END = r"[\p{L}\p{N},;:\-]$"
LIST_OR_CODE_END = r"(```|\n\s*([-*•]|\d+[.)])\s+[^\n]*)$"
FINAL_ANSWER_END = r"((^|\n)[ \t]*####[ \t]*[^\n]+|(?i:\banswer( is|:))[ \t]*[^\n]{1,40})$"


@dataclass(frozen=True)
class SftQuality:
    min_chars_cut: int = 100
    max_dup_ngram_frac: float = 0.5
    check_language: bool = True
    min_chars_language: int = 40
    name: str = "sft_quality"
    version: int = 2  # 2: a final-answer line is not a cut sentence
    decision_params: ClassVar[tuple] = ("max_dup_ngram_frac",)  # the others change what is scored

    def setup(self) -> None:
        if self.check_language:
            require("py3langid", "curate", "compare the languages of prompts and responses")

    def score(self, batch: pa.RecordBatch) -> Scored:
        resp = pc.fill_null(batch.column("response").cast(pa.large_string()), "")
        low = pc.utf8_lower(resp)
        trimmed = pc.utf8_rtrim_whitespace(resp)
        scores = {
            "placeholder": np.asarray(pc.match_substring_regex(low, PLACEHOLDER), dtype=bool)
            | np.asarray(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(resp)), 0), dtype=bool),
            "refusal": np.asarray(pc.match_substring_regex(low, REFUSAL), dtype=bool),
            "cut": (np.asarray(pc.match_substring_regex(trimmed, CUT_END), dtype=bool)
                    & ~np.asarray(pc.match_substring_regex(trimmed, LIST_OR_CODE_END), dtype=bool)
                    & ~np.asarray(pc.match_substring_regex(trimmed, FINAL_ANSWER_END), dtype=bool)
                    & (np.asarray(pc.utf8_length(trimmed)) >= self.min_chars_cut)),
            "dup_ngram_frac": dup_ngram_fraction(resp),
        }
        if self.check_language:
            prompt = pc.fill_null(batch.column("prompt").cast(pa.large_string()), "").to_pylist()
            scores["prompt_language"] = languages(prompt, self.min_chars_language)
            scores["response_language"] = languages(resp.to_pylist(), self.min_chars_language)
        return Scored(scores)

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        n = len(scores["placeholder"])
        out = np.full(n, None, dtype=object)
        rules = [
            ("empty_answer", np.asarray(scores["placeholder"], dtype=bool)),
            ("refusal", np.asarray(scores["refusal"], dtype=bool)),
            ("cut_mid_sentence", np.asarray(scores["cut"], dtype=bool)),
            ("repeated_ngrams", np.asarray(scores["dup_ngram_frac"], dtype=float) > self.max_dup_ngram_frac),
        ]
        if self.check_language and "prompt_language" in scores:
            p = np.asarray(scores["prompt_language"], dtype=object)
            r = np.asarray(scores["response_language"], dtype=object)
            rules.append(("language_mismatch", np.array([a is not None and b is not None and a != b
                                                         for a, b in zip(p, r)], dtype=bool)))
        for rule, hit in reversed(rules):  # the first rule in order wins
            out[hit] = rule
        return out


def dup_ngram_fraction(texts: pa.Array, n: int = 3, min_words: int = 30) -> np.ndarray:
    """Per text, the share of its word ``n``-grams that occur more than once in it (0 below ``min_words``)."""
    w = ngrams.words(texts)
    h, doc = ngrams.ngram_hashes(w, n)
    n_docs = len(w.offsets) - 1
    out = np.zeros(n_docs, dtype=np.float64)
    if not len(h):
        return out
    order = np.lexsort((h, doc))
    h, doc = h[order], doc[order]
    same = (h[1:] == h[:-1]) & (doc[1:] == doc[:-1])
    dup = np.zeros(len(h), dtype=bool)
    dup[1:] |= same
    dup[:-1] |= same
    total = np.bincount(doc, minlength=n_docs)
    dups = np.bincount(doc, weights=dup, minlength=n_docs)
    words_per_doc = np.diff(w.offsets)
    ok = (total > 0) & (words_per_doc >= min_words)
    out[ok] = dups[ok] / total[ok]
    return out


def languages(texts: list[str], min_letters: int) -> np.ndarray:
    """py3langid's label of each text with at least ``min_letters`` letters, else ``None``."""
    langid = require("py3langid", "curate", "compare the languages of prompts and responses")
    out = np.full(len(texts), None, dtype=object)
    for i, t in enumerate(texts):
        if sum(c.isalpha() for c in t[:2000]) >= min_letters:
            out[i] = _norm(langid.classify(t[:2000])[0])
    return out


def _norm(code: str) -> str:
    # Norwegian written two ways, and Malay/Indonesian, are one language for a mismatch: py3langid confuses them
    return {"nb": "no", "nn": "no", "ms": "id"}.get(code, code)
