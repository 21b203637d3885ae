"""``machine_text``: how much does a document read like a language model's prose?

Three kinds of evidence, each recorded:

* **boilerplate phrases** of chat assistants (``As an AI language model``, ``Certainly! Here's``, refusals,
  knowledge-cutoff disclaimers): :data:`PHRASES`, matched case-insensitively with any run of spaces;
  ``machine_text.phrases`` counts them.
* **over-used words** of assistant prose (``delve``, ``tapestry``, ``showcasing``, ``meticulous``...), the
  words whose frequency rose most in scientific abstracts after 2022 (Liang et al. 2024, "Mapping the
  increasing use of LLMs in scientific papers"; Kobak et al. 2024, "Delving into ChatGPT usage in academic
  writing through excess vocabulary"), chosen there by the ratio of their post-2022 to their pre-2022
  frequency. Each distinct one weighs by how rare it was before: :data:`REFERENCE` holds the
  words' frequencies from ``wordfreq`` 3.1 (Speer 2022, CC BY-SA 4.0), whose sources end in 2021, and a
  word of reference frequency ``f`` adds ``clip((log10(1 / f) - 4) / 2, 0, 1)`` (1 for a word as rare as
  ``delve``, 1e-6; about 0.35 for ``crucial``, 2e-5; nothing at 1e-4 or more). Repeating a word adds
  nothing: one author's habit is not the spread of a vocabulary. **Hedges** assistants over-use but people
  write too (``it's important to note that``, ``feel free to ask``, ``I hope this helps``: :data:`HEDGES`)
  weigh 1 each, as a word as rare as ``delve``. ``machine_text.markers`` is that weighted sum.
* optionally a **classifier** (``model:``), trained with ``tokenmill quality train --positive MODEL_TEXT
  --negative HUMAN_TEXT`` (``synth rephrase`` output beside its sources gives the pairs): ``machine_text.model``
  is its probability of the model-written class.

The evidence counted is that of the densest page: the :data:`WINDOW` consecutive words with the highest
``1.5 * phrases + MARKER_WEIGHT * markers``. Over a whole document, rare words gather by length alone: a
19th-century novel uses forty of them in 130,000 words and scored 0.98 (v1). A model-written page inside a
long human text still counts in full, and a text shorter than a page is one window.

``machine_text.score = 1 - exp(-(1.5 * phrases + MARKER_WEIGHT * markers))``: one boilerplate phrase gives
0.78, three words as rare as ``delve`` in one page 0.59, two 0.45. :data:`MARKER_WEIGHT` (0.3, 0.5 in v1) is
calibrated on human long-form text (books and Wikipedia articles), pages of 250 words: the densest page of
any of them scores at most 0.39 (BENCHMARKS.md, "machine_text on human long-form text": of C4's 2019 web
pages, held out, v1 removed 4.3%, v2 0.3%). With a model, the score is the larger of that and the
model's probability. ``machine_text.evidence`` lists what matched in that page (``phrase:certainly! here's;
word:delve x2``). Rule: ``machine_written`` when the score is at or above ``threshold`` (0.5), unless
``record_only: true``.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa

from tokenmill.curate.docmeta import strings
from tokenmill.curate.quality.classifier import load_model, model_file, predict_hq
from tokenmill.steps.contract import Scored

PHRASES = (
    "as an ai language model", "as an ai developed by", "as an ai assistant", "as a language model",
    "i'm just an ai", "i am just an ai", "as an artificial intelligence",
    "certainly! here's", "certainly! here is", "sure! here's", "sure! here is",
    "absolutely! here's", "i'm sorry, but i can't", "i'm sorry, but i cannot",
    "i cannot fulfill", "i can't assist with", "i cannot assist with", "i can't help with that",
    "i'm unable to provide", "as of my last knowledge update", "as of my knowledge cutoff",
    "as of my last training", "my knowledge cutoff", "i don't have personal opinions", "i don't have personal experiences",
    "i do not have personal opinions", "regenerate response",
)
HEDGES = (  # assistants over-use them, people write them too: each weighs as one rare over-used word
    "i hope this helps", "i hope this information helps", "i hope you find this helpful", "great question!",
    "feel free to ask", "let me know if you have any other questions", "let me know if you need any further",
    "it's important to note that", "it is important to note that", "it's worth noting that",
)
WINDOW = 250  # words: a page; evidence is that of the densest page (see the module docstring)
MARKER_WEIGHT = 0.3  # of the weighted over-used words in the score, calibrated on human long-form text
# frequency per word of English (wordfreq 3.1, `word_frequency(w, "en")`: sources up to 2021)
REFERENCE: dict[str, float] = {
    "delve": 1.38e-06, "delves": 5.13e-07, "delving": 6.03e-07, "tapestry": 1.74e-06, "intricate": 3.55e-06,
    "intricacies": 8.32e-07, "pivotal": 3.16e-06, "showcasing": 2.19e-06, "showcase": 8.32e-06, "showcases": 1.78e-06,
    "underscore": 9.33e-07, "underscores": 8.32e-07, "underscoring": 2.63e-07, "meticulous": 1.74e-06,
    "meticulously": 1.2e-06, "commendable": 1.17e-06, "realm": 1.15e-05, "multifaceted": 6.31e-07,
    "bolster": 2.04e-06, "bolstering": 3.89e-07, "foster": 2.14e-05, "fostering": 2.24e-06, "garner": 3.55e-06,
    "testament": 1.17e-05, "crucial": 1.91e-05, "vibrant": 4.68e-06, "seamless": 2.04e-06, "seamlessly": 1.26e-06,
    "leverage": 7.59e-06, "leveraging": 1.05e-06, "robust": 8.71e-06, "embark": 2.51e-06, "elevate": 2.4e-06,
    "paramount": 5.37e-06, "nuanced": 1.82e-06, "notably": 1.02e-05, "comprehensive": 2.29e-05,
    "invaluable": 3.47e-06, "unwavering": 1.02e-06, "navigate": 4.79e-06, "navigating": 1.95e-06,
    "navigates": 2.4e-07, "enhance": 1.1e-05, "enhancing": 4.37e-06, "enhances": 2.04e-06, "furthermore": 1.7e-05,
    "moreover": 1.45e-05, "additionally": 1.58e-05, "insights": 7.24e-06, "insightful": 2.57e-06,
    "profound": 8.71e-06, "resonate": 1.55e-06, "resonates": 1.2e-06, "captivating": 1.48e-06, "holistic": 2.14e-06,
    "streamline": 1.51e-06, "streamlining": 7.24e-07, "empower": 3.24e-06, "empowering": 3.02e-06,
    "endeavor": 3.63e-06, "endeavors": 2.09e-06, "noteworthy": 3.09e-06, "myriad": 3.09e-06, "plethora": 1.74e-06,
    "utilize": 5.62e-06, "utilizing": 4.27e-06, "strategically": 2.82e-06, "adhere": 3.72e-06, "boast": 3.24e-06,
    "boasts": 4.07e-06, "landscape": 2.29e-05, "groundbreaking": 2.88e-06, "transformative": 1.38e-06,
    "unparalleled": 1.58e-06, "harness": 4.68e-06, "harnessing": 7.59e-07, "elevating": 1.05e-06,
}
_PHRASE_RE = re.compile("|".join(re.escape(p).replace(r"\ ", r"\s+").replace("'", "['’]")
                                 for p in PHRASES + HEDGES), re.IGNORECASE)
_HEDGES = frozenset(HEDGES)
_WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")


@dataclass(frozen=True)
class MachineText:
    threshold: float = 0.5
    record_only: bool = False
    model: str | None = None
    model_sha256: str = ""  # set from the model file; given (a run's recorded step), it must match the file

    name: ClassVar[str] = "machine_text"
    version: ClassVar[int] = 2  # v2: evidence of the densest page, hedges apart, markers weigh 0.3 (v1: 0.5)
    decision_params: ClassVar[tuple] = ("threshold", "record_only")
    thresholds: ClassVar[dict] = {"score": "threshold"}
    histogram_stats: ClassVar[dict] = {"score": (0.0, 1.0)}

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) or not 0 < self.threshold <= 1:
            raise ValueError(f"threshold: expected a score in (0, 1], got {self.threshold!r}")
        if not isinstance(self.record_only, bool):
            raise ValueError(f"record_only: expected true or false, got {self.record_only!r}")
        if self.model is not None:
            if not Path(model_file(str(self.model))).is_file():
                raise ValueError(f"model: {self.model!r} not found; train one with `tokenmill quality train "
                                 "--positive MODEL_TEXT... --negative HUMAN_TEXT... --out machine.bin`")
            digest = hashlib.sha256(Path(model_file(str(self.model))).read_bytes()).hexdigest()
            if self.model_sha256 and self.model_sha256 != digest:
                raise ValueError(f"model: {self.model!r} is not the model this step was run with (sha256 "
                                 f"{self.model_sha256[:12]}..., the file has {digest[:12]}...)")
            object.__setattr__(self, "model_sha256", digest)

    def setup(self) -> None:
        if self.model:
            load_model(self.model)

    def score(self, batch: pa.RecordBatch) -> Scored:
        texts = [t or "" for t in strings(batch, "text")]
        rows = [text_evidence(t) for t in texts]
        phrases = np.array([r[0] for r in rows], dtype=np.int64)
        markers = np.array([r[1] for r in rows], dtype=np.float64).round(6)
        score = 1.0 - np.exp(-(1.5 * phrases + MARKER_WEIGHT * markers))
        scores = {"phrases": phrases, "markers": markers}
        if self.model:
            prob = predict_hq(load_model(self.model), pa.array(texts, pa.large_string())).astype(np.float64).round(6)
            scores["model"] = prob
            score = np.maximum(score, prob)
        scores["score"] = score.round(6)
        scores["evidence"] = pa.array([r[2] for r in rows], pa.string())
        return Scored(scores)

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        score = np.asarray(scores["score"], dtype=np.float64)
        out = np.full(len(score), None, dtype=object)
        if not self.record_only:
            out[score >= self.threshold] = "machine_written"
        return out


def text_evidence(text: str) -> tuple[int, float, str | None]:
    """``(phrases, markers, evidence)`` of the densest page of one text (see the module's docstring)."""
    words = list(_WORD_RE.finditer(text))
    starts = [m.start() for m in words]
    found = [(bisect.bisect_right(starts, m.start()), _phrase(m.group(0))) for m in _PHRASE_RE.finditer(text)]
    found += [(i, w) for i, m in enumerate(words) if (w := m.group(0).lower()) in REFERENCE]
    found.sort(key=lambda hit: hit[0])
    page = _densest(found)
    phrases = sum(1 for k in page.elements() if k in PHRASES)
    markers = sum(_weight(k) for k in page if k not in PHRASES)
    parts = [f"phrase:{p}" + (f" x{c}" if c > 1 else "") for p, c in sorted(page.items()) if p in PHRASES or p in _HEDGES]
    parts += [f"word:{w}" + (f" x{c}" if c > 1 else "") for w, c in sorted(page.items()) if w in REFERENCE]
    return phrases, markers, "; ".join(parts) or None


def _phrase(matched: str) -> str:
    return re.sub(r"\s+", " ", matched.lower()).replace("’", "'")


def _weight(key: str) -> float:
    """A hedge or over-used word's weight in ``markers`` (counted once per page however often it recurs)."""
    if key in _HEDGES:
        return 1.0
    return min(max((-math.log10(REFERENCE[key]) - 4) / 2, 0.0), 1.0)


def _densest(found: list[tuple[int, str]]) -> Counter:
    """What matched in the :data:`WINDOW` words with the highest score, from ``(word index, key)`` in order:
    one pass, the window's sum kept as matches enter and leave (linear in the matches)."""
    best, best_sum, page, total, lo = Counter(), 0.0, Counter(), 0.0, 0
    for pos, key in found:
        total += _gain(key, page)
        page[key] += 1
        while found[lo][0] <= pos - WINDOW:
            gone = found[lo][1]
            page[gone] -= 1
            total -= _gain(gone, page)
            page += Counter()  # drops keys whose count fell to 0
            lo += 1
        if total > best_sum + 1e-12:
            best, best_sum = Counter(page), total
    return best


def _gain(key: str, page: Counter) -> float:
    """What one more ``key`` adds to a page's score: a phrase every time, a hedge or word only the first time."""
    if key in PHRASES:
        return 1.5
    return MARKER_WEIGHT * _weight(key) if not page[key] else 0.0
