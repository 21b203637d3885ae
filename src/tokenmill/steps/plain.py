"""A plain picklable callable as a document step: the adapter that lets every track run one cascade.

A plain step is ``step(batch) -> (kept_batch, {reason: n_filtered})`` over a ``Document`` record batch (a
function, a ``functools.partial``, an object with ``__call__``). :func:`as_doc_step` wraps it in
:class:`PlainStep`, so its removals reach the decision ledger with a reason like every other step's; its
name carries a version (``length_v1``) so a changed rule never hides behind an old name.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from tokenmill.errors import ConfigError
from tokenmill.steps.contract import AnyStep, CorpusStep, DocStep, Scored, Step, step_name

ROW = "__tokenmill_row"
_VERSIONED = re.compile(r"^(?P<name>.+)_v(?P<version>\d+)$")


@dataclass(frozen=True)
class PlainStep:
    """A plain callable step, ``step(batch) -> (kept_batch, {reason: n_filtered})``, as a document step, so
    that the track runs it in its cascade and its removals reach the decision ledger like every other step's.

    ``score`` runs the callable once over the batch with a row-index column, and records which rows it kept
    (``<name>.kept``) and why each other row went (``<name>.rule``): the callable's reason when it names one
    for all its removals (one key whose count is the rows removed), else, for each removed row, the reason a
    call on that row alone gives (one call per removed row, only for such callables). A rewrite of the kept
    rows' text is kept; what the callable counts in a batch it removes nothing from is counted beside the
    filtering (the run's ``counts.extra``). The callable must return rows of its input with every column (a ``ConfigError``
    otherwise). Its name and version come from its ``name`` (``length_v1`` -> ``length``, 1), else its
    function's or class's own name, version 1; a reason ``<name>_v<version>:<rule>`` keeps its spelling, any other is prefixed.
    """

    _fn: Callable[..., Any]
    name: str = ""
    version: int = 1
    decision_params: ClassVar[tuple] = ()  # the callable decides inside: the ledger cannot replay another rule

    @property
    def wrapped(self) -> Callable[..., Any]:
        """The callable itself (its parameters are the step's: :func:`~tokenmill.steps.contract.step_params`)."""
        return self._fn

    def __post_init__(self) -> None:
        full = step_name(self._fn).rsplit(".", 1)[-1]  # a function's own name: ledger columns are <name>.<stat>
        m = _VERSIONED.match(full)
        object.__setattr__(self, "name", m.group("name") if m else full)
        object.__setattr__(self, "version", int(m.group("version")) if m else 1)

    def setup(self) -> None:
        setup = getattr(self._fn, "setup", None)
        if callable(setup):
            setup()

    def score(self, batch: pa.RecordBatch) -> Scored:
        n = batch.num_rows
        kept, counts = self._call(batch)
        rows = kept.column(ROW).to_numpy().astype(np.int64)
        keep = np.zeros(n, dtype=bool)
        keep[rows] = True
        rules = np.full(n, None, dtype=object)
        gone = np.flatnonzero(~keep)
        named = [k for k, v in counts.items() if v]
        extra = Counter()
        if not len(gone):  # nothing removed: what the callable counted is counted beside the filtering
            extra.update({k: v for k, v in counts.items() if v})
        elif len(named) == 1 and counts[named[0]] == len(gone):
            rules[gone] = self._rule(named[0])
        else:  # several reasons: each removed row's own
            for i in gone:
                _, alone = self._call(batch.slice(int(i), 1))
                rules[i] = self._rule(next((k for k, v in alone.items() if v), "filtered"))
        text = None
        new = kept.column("text")
        if not new.equals(batch.column("text").take(pa.array(rows))):
            values = batch.column("text").to_pylist()
            for row, value in zip(rows.tolist(), new.to_pylist()):
                values[row] = value
            text = pa.array(values, batch.schema.field("text").type)
        return Scored({"kept": keep, "rule": rules}, text=text, counts=extra)

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.array([None if k else r for k, r in zip(scores["kept"], scores["rule"])], dtype=object)

    def _call(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[str, int]]:
        tagged = batch.append_column(ROW, pa.array(np.arange(batch.num_rows), pa.int64()))
        kept, counts = self._fn(tagged)
        if ROW not in kept.schema.names or "text" not in kept.schema.names:
            raise ConfigError(f"step {self.name!r} dropped columns of its batch; a step returns the kept rows with "
                              "every column (or write it as a document step: score, then decide)")
        return kept, dict(counts)

    def _rule(self, key: str) -> str:
        prefix = f"{self.name}_v{self.version}:"
        return key[len(prefix):] if key.startswith(prefix) else key


@dataclass(frozen=True)
class RecordedPlainStep:
    """A :class:`PlainStep` as the ledger remembers it: ``decide`` from its recorded ``kept``/``rule`` columns
    (``tokenmill funnel`` replays a run without the callable)."""

    name: str
    version: int = 1
    decision_params: ClassVar[tuple] = ()

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        return PlainStep.decide(self, scores)  # type: ignore[arg-type]


def as_doc_step(step: AnyStep) -> Step:
    """``step`` itself when it is a document step or a corpus step, else a :class:`PlainStep` around the
    callable: every step of a track then runs in one cascade."""
    if isinstance(step, (DocStep, CorpusStep)):
        return step
    return PlainStep(step)
