"""The contract of a per-document curation step: score a batch, then decide from the scores alone.

A step is a small frozen dataclass (its fields are its parameters) with:

``name``      registry name used in ``steps:`` (``gopher_quality``); ``version`` an int bumped whenever
              the logic changes, so a changed rule never hides behind an old name.
``setup()``   called once per worker process before the first batch (load a model); cheap to call again.
``score(batch) -> Scored``
              computes per-document statistics over a ``Document`` record batch (vectorised), and, for a
              modifier, the rewritten ``text`` column. Must not depend on the thresholds it decides with,
              so the funnel can be recomputed from stored scores.
``decide(scores) -> array``
              from the statistics only (a mapping stat -> numpy array), the rule that removes each document
              (a ``str``) or ``None`` to keep it, using the step's threshold fields.

Optional class attributes: ``decision_params`` (the fields ``decide`` uses; ``tokenmill funnel --set``
refuses to change any other, since the ledger cannot replay a change of the scores) and ``thresholds``
(``{stat: field}``, where ``report.html`` marks each statistic's threshold).

Ledger columns are ``<name>.<stat>``; reasons are ``<name>_v<version>:<rule>``. Every step must survive
``pickle``; heavy state is built in ``setup`` and kept out of the pickled fields.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa


@dataclass
class Scored:
    scores: dict[str, Any]  # statistic -> per-row values (numpy array or Arrow array), one per document
    text: pa.Array | None = None  # modifiers only: the rewritten text column, same length and order
    counts: Counter = field(default_factory=Counter)  # what the step did beyond scoring (e.g. pii:email)


class DocStep(Protocol):
    name: str
    version: int

    def setup(self) -> None: ...

    def score(self, batch: pa.RecordBatch) -> Scored: ...

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray: ...


def step_params(step: Any) -> dict[str, Any]:
    """A step's parameters, JSON-able: what its fingerprint is made of.

    A dataclass's fields; a ``functools.partial``'s arguments; another object's public attributes; nothing
    for a plain function (its name is its identity).
    """
    wrapped = getattr(step, "wrapped", None)  # a plain callable run as a document step: its own parameters
    if wrapped is not None:
        return step_params(wrapped)
    if dataclasses.is_dataclass(step):
        return {f.name: getattr(step, f.name) for f in dataclasses.fields(step) if not f.name.startswith("_")}
    if isinstance(step, functools.partial):
        return {"args": list(step.args), "keywords": dict(step.keywords)}
    if hasattr(step, "__dict__") and not hasattr(step, "__code__"):
        return {k: v for k, v in sorted(vars(step).items()) if not k.startswith("_")}
    return {}


def step_name(step: Any) -> str:
    """``step.name``; for a plain function or a class without one, its qualified name (never ``repr``)."""
    name = getattr(step, "name", None)
    if isinstance(name, str) and name:
        return name
    target = step.func if isinstance(step, functools.partial) else step
    if not hasattr(target, "__qualname__"):
        target = type(target)
    return f"{target.__module__}.{target.__qualname__}"


def step_id(step: Any) -> str:
    """``<name>_v<version>``: the prefix of the step's reasons."""
    return f"{step.name}_v{step.version}"


def step_entry(step: Any, stage: str, kind: str) -> dict:
    """A step's entry in a manifest's ``steps`` list: its name, version, id, kind, stage and parameters."""
    return {"name": step.name, "version": step.version, "id": step_id(step), "kind": kind, "stage": stage,
            "params": step_params(step)}


def step_identity(step: Any) -> dict[str, Any]:
    """``{"name", "version", "params"}``: what a run records of a step (version 0 when it names none)."""
    return {"name": step_name(step), "version": getattr(step, "version", 0), "params": step_params(step)}


def step_fingerprint(step: Any) -> str:
    """Name, version and parameters, never ``repr`` (a plain function's repr holds a memory address)."""
    return hashlib.sha256(json.dumps(step_identity(step), sort_keys=True, default=str).encode()).hexdigest()


def column(step: Any, stat: str) -> str:
    """The ledger column of one statistic: ``<name>.<stat>``."""
    return f"{step.name}.{stat}"


def reason(step: Any, rule: str) -> str:
    return f"{step_id(step)}:{rule}"
