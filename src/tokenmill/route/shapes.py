"""Record shapes that look like SFT or documents by their field names but are neither.

``kto``             ``{prompt, completion, label}`` or ``{messages, label}`` with a boolean label: unpaired
                    preference data (KTO);
                    ``label: false`` completions are what the model must *not* say, so it is never SFT.
``pairwise``        ``{question, response_j, response_k}`` (Stack Exchange paired style): one response is
                    preferred over the other; preference data, not two SFT answers.
``classification``  a short ``text`` field beside a ``label`` with few distinct values: a classifier's
                    training set; neither a pretraining corpus nor conversations. Long documents with a
                    label (quality-labelled web pages) stay documents.
"""

from __future__ import annotations

from typing import Any

from tokenmill.route.profile import Column

LABEL_NAMES = ("label", "labels", "class", "category", "sentiment", "target")
PAIRWISE = (("response_j", "response_k"), ("chosen_response", "rejected_response"))
CLASSIFY_MAX_CHARS = 600  # mean text length under which a labelled text column reads as classification
CLASSIFY_MAX_LABELS = 20


def kto_schema(rows: list[dict[str, Any]], cols: dict[str, Column]) -> dict | None:
    """KTO's unpaired layout: ``prompt``/``completion`` or ``messages`` (the trailing assistant turns are the
    completion) beside a boolean ``label``."""
    if "label" not in cols or not ({"completion", "prompt"} <= set(cols) or "messages" in cols):
        return None
    labels = [r.get("label") for r in rows if "label" in r]
    if not labels or not all(isinstance(v, bool) for v in labels):
        return None
    if "completion" not in cols or "prompt" not in cols:
        return {"record": None, "style": "kto", "messages": "messages", "prompt": None, "chosen": "messages",
                "rejected": None, "label": "label", "columns": list(cols)}
    return {"record": None, "style": "kto", "prompt": "prompt", "chosen": "completion", "rejected": "completion",
            "label": "label", "columns": list(cols)}


def pairwise_schema(cols: dict[str, Column]) -> dict | None:
    for preferred, other in PAIRWISE:
        if preferred in cols and other in cols:
            prompt = next((c for c in ("question", "prompt", "instruction", "input") if c in cols), None)
            return {"record": None, "style": "pairwise", "prompt": prompt, "chosen": preferred, "rejected": other,
                    "columns": list(cols)}
    return None


def classification_warning(rows: list[dict[str, Any]], cols: dict[str, Column], text: str) -> str:
    """A warning when ``text`` is short and a label column with few values sits beside it, else ""."""
    label = next((c for c in LABEL_NAMES if c in cols), None)
    if label is None or cols[text].mean_len >= CLASSIFY_MAX_CHARS:
        return ""
    values = [r.get(label) for r in rows if r.get(label) is not None]
    distinct = {repr(v) for v in values}
    if len(values) * 2 < len(rows) or not 1 < len(distinct) <= CLASSIFY_MAX_LABELS:
        return ""
    return (f"{text!r} holds short texts (mean {cols[text].mean_len:.0f} characters) labelled by {label!r} "
            f"({len(distinct)} distinct values): a classification data set, not a pretraining corpus or "
            "conversations; pass --force to train on the texts anyway")


def label_warning(rows: list[dict[str, Any]], cols: dict[str, Column], text: str) -> str:
    """A note when a label-like column sits beside (long) documents: its values go to each document's meta."""
    label = next((c for c in LABEL_NAMES if c in cols and c != text), None)
    if label is None:
        return ""
    distinct = {repr(r.get(label)) for r in rows if r.get(label) is not None}
    return (f"a label column {label!r} ({len(distinct)} distinct values) sits beside the documents of {text!r}: "
            "a labelled set (classification or quality labels?); the labels are kept in each document's meta, "
            "not trained on. Check that this is a corpus to pretrain on")
