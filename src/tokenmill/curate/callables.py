"""Curation steps: plain picklable callables over a ``Document`` record batch.

A step returns ``(kept_batch, {reason: n_filtered})``; the reason becomes a counted line of the run's
accounting. Scores are computed with ``pyarrow.compute``, never per-token Python loops. Step names carry
a version (``length_v1``) so a changed rule never hides behind an old name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tokenmill.errors import ConfigError


@dataclass(frozen=True)
class LengthFilter:
    """Keep documents whose text has between ``min_chars`` and ``max_chars`` characters.

    A thin adapter over :class:`tokenmill.curate.heuristics.length.Length` (score, then decide) for the
    pretraining track's ``(kept_batch, counts)`` step shape.
    """

    min_chars: int = 0
    max_chars: int | None = None
    name: str = "length_v1"

    def __post_init__(self) -> None:
        for key in ("min_chars", "max_chars"):
            value = getattr(self, key)
            if value is None and key == "max_chars":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{key}: expected a whole number >= 0, got {value!r}")

    def __call__(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[str, int]]:
        from tokenmill.curate.heuristics.length import Length

        step = Length(min_chars=self.min_chars, max_chars=self.max_chars)
        rules = step.decide(step.score(batch).scores)
        removed = np.array([r is not None for r in rules], dtype=bool)
        counts = Counter(f"{self.name}:{r}" for r in rules if r is not None)
        return batch.filter(pa.array(~removed)), dict(counts)


STEPS = {"length": LengthFilter}


def build_steps(specs: list[dict[str, Any]] | None, *, source: str = "config") -> list:
    """Steps from the pipeline file's ``steps:`` list; every problem reported at once, prefixed by ``source``."""
    steps, problems = [], []
    for i, spec in enumerate(specs or []):
        options = {k: v for k, v in spec.items() if k != "name"}
        factory = STEPS.get(spec.get("name"))
        if factory is None:
            known = ", ".join(STEPS)
            problems.append(f"{source}: steps[{i}].name: unknown step {spec.get('name')!r}; known: {known}")
            continue
        try:
            steps.append(factory(**options))
        except (TypeError, ValueError) as exc:
            problems.append(f"{source}: steps[{i}]: {exc}")
    if problems:
        raise ConfigError(problems)
    return steps
