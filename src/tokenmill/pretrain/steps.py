"""The first curation step, kept for installations without the heuristics package.

``LengthFilter`` follows the document-step contract (:mod:`tokenmill.curate.step`: ``score`` then
``decide``; statistic ``length.chars``, rules ``too_short`` / ``too_long``) and can still be called on a
batch directly (``(kept_batch, {reason: n})``). ``tokenmill.curate.build`` uses it for ``length`` when the
registry's heuristics module is absent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import ConfigError


@dataclass(frozen=True)
class LengthFilter:
    """Keep documents whose text has between ``min_chars`` and ``max_chars`` characters."""

    min_chars: int = 0
    max_chars: int | None = None

    name: ClassVar[str] = "length"
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ("min_chars", "max_chars")
    thresholds: ClassVar[dict] = {"chars": "min_chars"}

    def __post_init__(self) -> None:
        for key in ("min_chars", "max_chars"):
            value = getattr(self, key)
            if value is None and key == "max_chars":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{key}: expected a whole number >= 0, got {value!r}")

    def setup(self) -> None:
        pass

    def score(self, batch: pa.RecordBatch) -> Any:
        from tokenmill.curate.step import Scored

        return Scored({"chars": pc.utf8_length(batch.column("text")).to_numpy().astype(np.int64)})

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        n = np.asarray(scores["chars"])
        out = np.full(len(n), None, dtype=object)
        if self.max_chars is not None:
            out[n > self.max_chars] = "too_long"
        out[n < self.min_chars] = "too_short"
        return out

    def __call__(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[str, int]]:
        rules = self.decide(self.score(batch).scores)
        counts: dict[str, int] = {}
        for r in rules[rules != None]:
            counts[f"length_v1:{r}"] = counts.get(f"length_v1:{r}", 0) + 1
        return batch.filter(pa.array(rules == None)), counts


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
