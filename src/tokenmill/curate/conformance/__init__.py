"""Conformance vectors for the heuristic steps (``heuristics.jsonl``, format in ``README.md`` beside it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

import numpy as np
import pyarrow as pa

from tokenmill.steps.registry import step_class

VECTORS = "heuristics.jsonl"


def vectors() -> Iterator[dict]:
    """Every vector of ``heuristics.jsonl``, in file order."""
    with resources.files(__spec__.parent).joinpath(VECTORS).open("r", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _plain(value: Any) -> Any:
    value = value.item() if isinstance(value, np.generic) else value
    return round(value, 12) if isinstance(value, float) else value


def score_case(step_name: str, params: dict, text: str | None) -> dict:
    """One text through one step, as a vector records it: ``scores``, ``rules`` (each rule: fires, or None when
    disabled), ``decision`` (the first rule that fires), ``text_after`` (modifiers)."""
    return score_cases(step_name, params, [text])[0]


def score_cases(step_name: str, params: dict, texts: list[str | None]) -> list[dict]:
    """:func:`score_case` for several texts, scored as one batch."""
    step = step_class(step_name)(**params)
    batch = pa.record_batch({"id": pa.array([str(i) for i in range(len(texts))]),
                             "text": pa.array(texts, pa.large_string())})
    scored = step.score(batch)
    decisions = step.decide(scored.scores)
    checks = step.checks(scored.scores)
    out = []
    for i in range(len(texts)):
        row = {"scores": {k: _plain(np.asarray(v)[i]) for k, v in sorted(scored.scores.items())},
               "rules": {rule: None if mask is None else bool(np.asarray(mask)[i]) for rule, mask in checks},
               "decision": decisions[i]}
        if scored.text is not None:
            row["text_after"] = scored.text[i].as_py()
        out.append(row)
    return out
