"""Curation steps: plain picklable callables over a ``Document`` record batch.

A step returns ``(kept_batch, {reason: n_filtered})``; the reason becomes a counted line of the run's
accounting. Scores are computed with ``pyarrow.compute``, never per-token Python loops. Step names carry
a version (``length_v1``) so a changed rule never hides behind an old name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import ConfigError


@dataclass(frozen=True)
class LengthFilter:
    """Keep documents whose text has between ``min_chars`` and ``max_chars`` characters."""

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
        n = pc.utf8_length(batch.column("text"))
        short = pc.less(n, self.min_chars)
        long_ = pc.greater(n, self.max_chars) if self.max_chars is not None else pc.equal(n, -1)
        keep = pc.invert(pc.or_(short, long_))
        counts = {f"{self.name}:too_short": pc.sum(short).as_py() or 0,
                  f"{self.name}:too_long": pc.sum(long_).as_py() or 0}
        return batch.filter(keep), {k: v for k, v in counts.items() if v}


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
