"""Evidence that a text column laid out in question/answer lines holds documents, counted over a sample.

A Q&A site's dump (RedPajama's StackExchange slice: ``text`` = ``"Q: … A: …"`` beside ``meta`` and ``stats``), an
FAQ page and an interview all use ``Q:``/``A:`` lines, as does a rendered chat. Per record
:func:`tokenmill.route.content.qa_layout` gives the document signs; here they are counted for the file, with how
much each record agrees with "document" (``signs / (signs + 1)``: the Q/A lines count once against it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tokenmill.route.profile import URL_NAMES, Column

CORPUS_META_NAMES = {"meta", "metadata", "stats", "source", "timestamp", "language", "date", "crawl_date",
                     "warc_record_id", *URL_NAMES}


def corpus_metadata(cols: dict[str, Column], text: str) -> list[str]:
    """Columns beside ``text`` that a pretraining corpus carries (``meta``, ``stats``, ``url``, ``timestamp``...)."""
    return [str(c) for c in cols if c != text and str(c).lower() in CORPUS_META_NAMES]


@dataclass
class QaCount:
    """Records laid out in question/answer lines that read as documents, and why."""

    records: int = 0
    agreement: float = 0.0  # summed per-record agreement with "document"
    signs: Counter = field(default_factory=Counter)

    def add(self, signs: list[str]) -> None:
        self.records += 1
        self.agreement += len(signs) / (len(signs) + 1)
        self.signs.update(signs)

    def warning(self, n: int, meta: list[str]) -> str:
        why = ", ".join(f"{s} {k}" for s, k in self.signs.most_common())
        cols = f" ({', '.join(meta)})" if meta and "corpus metadata columns" in self.signs else ""
        return (f"{self.records} of {n} records are laid out as question/answer lines (Q:/A:) but read as documents "
                f"({why}{cols}): Q&A-site, FAQ or interview text; the evidence is split, so the confidence is "
                "lower. If they are SFT pairs, map prompt and response fields in a config schema")
