"""The step contract: what every step of every track is, built in or a user's own.

Two kinds of step, told apart by ``isinstance`` against the two protocols below:

* a **document step** (:class:`DocStep`): scores a batch and decides per document; runs inside a map stage,
  in the same pass as its neighbours (the cascade, :mod:`tokenmill.steps.cascade`);
* a **corpus step** (:class:`CorpusStep`): a decision that needs every document (dedup, "keep the top 10%").
  ``stages(upstream)`` returns stages that read the documents stage named ``upstream`` and end in a documents
  stage of their own. A step that can be either (``quality`` with ``threshold`` or ``top_fraction``) says
  which it is through a ``corpus`` attribute.

A document step is a small frozen dataclass (its fields are its parameters) with:

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

A step whose code lives outside tokenmill (a user's ``{step: mypkg.filters:MyFilter}``, or one an installed
package registers) carries its package and version in its identity (:func:`step_package`): upgrading the
package changes the run's fingerprint, so no part scored by the old code is resumed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeGuard, runtime_checkable

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from tokenmill.engine.stage import Stage


@dataclass
class Scored:
    scores: dict[str, Any]  # statistic -> per-row values (numpy array or Arrow array), one per document
    text: pa.Array | None = None  # modifiers only: the rewritten text column, same length and order
    counts: Counter = field(default_factory=Counter)  # what the step did beyond scoring (e.g. pii:email)


@runtime_checkable
class DocStep(Protocol):
    """Score, then decide. ``setup()`` is optional (called once per worker when present)."""

    @property
    def name(self) -> str: ...  # read-only here, so that a frozen dataclass's field matches

    @property
    def version(self) -> int: ...

    def score(self, batch: pa.RecordBatch) -> Scored: ...

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray: ...


@runtime_checkable
class CorpusStep(Protocol):
    """Stages over the documents stage ``upstream``, ending in a documents stage of their own.

    The upstream stage's files (its results' ``docs`` and ``ledger``, relative to the output) may lie in
    segment files (:mod:`tokenmill.base.segments`): read them with :func:`read_table`, never by their path
    alone."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    def stages(self, upstream: str) -> list[Stage]: ...


Step: TypeAlias = "DocStep | CorpusStep"  # a built step: what a track runs
# what a track is given: a step, or a plain callable ``step(batch) -> (kept, counts)`` (steps/plain.py)
AnyStep: TypeAlias = "DocStep | CorpusStep | Callable[..., Any]"


def read_table(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """The Parquet file ``path`` of an earlier stage (a unit's documents, its ledger part) as a table, wherever
    it lies: the file itself, or its slice of a segment file of its directory."""
    import pyarrow.parquet as pq

    from tokenmill.base import segments

    return pq.read_table(segments.arrow_source(Path(path)), columns=columns)


def is_corpus_step(step: object) -> TypeGuard[CorpusStep]:
    """A :class:`CorpusStep`; one that is also a :class:`DocStep` is a corpus step when its ``corpus`` says so."""
    if not isinstance(step, CorpusStep):
        return False
    return bool(getattr(step, "corpus", True)) if isinstance(step, DocStep) else True


def is_doc_step(step: object) -> TypeGuard[DocStep]:
    """A :class:`DocStep` that runs as one (not a corpus step)."""
    return isinstance(step, DocStep) and not is_corpus_step(step)


def step_params(step: AnyStep) -> dict[str, Any]:
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


def step_name(step: AnyStep) -> str:
    """``step.name``; for a plain function or a class without one, its qualified name (never ``repr``)."""
    name = getattr(step, "name", None)
    if isinstance(name, str) and name:
        return name
    target = step.func if isinstance(step, functools.partial) else step
    return ".".join(_code_name(target))


def step_id(step: Step) -> str:
    """``<name>_v<version>``: the prefix of the step's reasons."""
    return f"{step.name}_v{step.version}"


def step_entry(step: Step, stage: str, kind: str) -> dict:
    """A step's entry in a manifest's ``steps`` list: its name, version, id, kind, stage and parameters."""
    return _with_package({"name": step.name, "version": step.version, "id": step_id(step), "kind": kind,
                          "stage": stage, "params": step_params(step)}, step)


def stage_entry(step: Step) -> dict:
    """A step as a stage's parameters hold it (they enter the stage's fingerprint): id, parameters, package."""
    return _with_package({"id": step_id(step), "params": step_params(step)}, step)


def step_identity(step: AnyStep) -> dict[str, Any]:
    """``{"name", "version", "params"}``: what a run records of a step (version 0 when it names none), and
    ``package`` for a step whose code lives outside tokenmill."""
    identity = {"name": step_name(step), "version": getattr(step, "version", 0), "params": step_params(step)}
    return _with_package(identity, step)


def step_package(step: AnyStep) -> dict[str, Any] | None:
    """``{"name", "version"}`` of the installed distribution named like the step's top-level module (else the
    ``__version__`` that module states); None for tokenmill's own steps and for code that names no version (a
    test's step, a function in a script)."""
    target = getattr(step, "wrapped", step)  # a plain callable run as a document step: the callable's
    target = target.func if isinstance(target, functools.partial) else target
    module = getattr(target, "__module__", None) or type(target).__module__
    top = module.partition(".")[0]
    if top in ("tokenmill", "builtins", "__main__"):
        return None
    return _distribution(top)


@functools.cache
def _distribution(top: str) -> dict[str, Any] | None:
    """The distribution named like the top-level module (``mill_extras`` -> ``mill-extras``: one lookup on the
    path, not a scan of every installed package), else the module's own ``__version__``."""
    try:
        dist = metadata.distribution(top)
        return {"name": dist.metadata["Name"], "version": dist.version}
    except metadata.PackageNotFoundError:
        version = getattr(sys.modules.get(top), "__version__", None)
        return {"name": top, "version": str(version)} if version is not None else None


def step_packages(steps: Iterable[AnyStep]) -> dict[str, Any]:
    """``{"step_packages": [...]}`` for a run's config when some of ``steps`` come from outside tokenmill (each
    package once, in order), else ``{}``: the packages' versions then enter the run's fingerprint."""
    found = []
    for step in steps:
        package = step_package(getattr(step, "step", step))  # a step on a view (sft/corpus.py): the step's
        if package and package not in found:
            found.append(package)
    return {"step_packages": found} if found else {}


def _with_package(entry: dict[str, Any], step: AnyStep) -> dict[str, Any]:
    """``entry`` with, for a step from outside tokenmill, its package and its class (``module:Class``: what
    ``tokenmill funnel --set`` rebuilds it from)."""
    package = step_package(step)
    return {**entry, "package": package, "class": step_class_path(step)} if package else entry


def step_class_path(step: AnyStep) -> str:
    """``module:Class`` of a step (of the callable, for a plain step)."""
    target = getattr(step, "wrapped", step)
    target = target.func if isinstance(target, functools.partial) else target
    return ":".join(_code_name(target))


def _code_name(target: object) -> tuple[str, str]:
    """The module and qualified name of a function or class; of its class for any other object."""
    qualname = getattr(target, "__qualname__", None)
    if qualname is None:
        return type(target).__module__, type(target).__qualname__
    return target.__module__, qualname


def step_fingerprint(step: AnyStep) -> str:
    """Name, version and parameters, never ``repr`` (a plain function's repr holds a memory address)."""
    return hashlib.sha256(json.dumps(step_identity(step), sort_keys=True, default=str).encode()).hexdigest()


def column(step: Step, stat: str) -> str:
    """The ledger column of one statistic: ``<name>.<stat>``."""
    return f"{step.name}.{stat}"


def reason(step: Step, rule: str) -> str:
    return f"{step_id(step)}:{rule}"
