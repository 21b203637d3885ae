"""Typed stage outputs: what one unit of a stage hands the stages after it, read by field and checked.

A task returns its output as ``UnitResult.data`` (a JSON-able dict: it is what the completion marker
stores, so a resumed run reads it back). A producer builds it from one of the classes below (:func:`as_data`:
the fields it sets, and the stage's own counts beside them) and names the class as its task's ``output``; the
engine checks every unit's data against it when the unit commits, before its marker is written
(``engine/local.py``), and every stage that reads an earlier stage's results reads them through
:func:`output` with the same class, which checks that each field is there with its type and raises
:class:`~tokenmill.errors.StageError` naming the stage, the unit and the field otherwise. A key renamed on one
side then fails at the boundary, once, with a clear message, instead of as a ``KeyError`` (or a silent
``None``) deep in a planner.

=================  =====================================================================================
``Documents``      a documents stage's unit: its surviving documents file (``docs``), its ledger part
                   (``ledger``, or None), the input unit's name (``unit``), a few removed documents per
                   reason for the report (``samples``), a corpus-wide cut (``cut``, quality top fraction),
                   the file's documents and bytes (``rows``, ``size``: what a later planner sizes its
                   stage by, read here and not from the file, which a finished stage may have dropped)
``Partitioned``    a map stage's unit that wrote hash-partitioned files under one directory (``dir``) in
                   ``partitions`` partitions (dedup signatures, buckets, components)
``Shards``         a track's shards stage: the shard headers written (``shards``)
=================  =====================================================================================
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

from tokenmill.engine.stage import UnitResult
from tokenmill.errors import StageError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


@dataclass(frozen=True)
class Documents:
    docs: str
    ledger: str | None = None
    unit: str | None = None
    samples: dict = field(default_factory=dict)
    cut: float | None = None
    rows: int | None = None
    size: int | None = None


@dataclass(frozen=True)
class Partitioned:
    dir: str
    partitions: int = 1


@dataclass(frozen=True)
class Shards:
    shards: list


def as_data(out: DataclassInstance, **extra: Any) -> dict[str, Any]:
    """``out`` as a unit's ``UnitResult.data``: the fields set away from their defaults (an unset optional field is
    left out, as :func:`output` reads it back), then ``extra``, the stage's own counts."""
    data: dict[str, Any] = {}
    for f in dataclasses.fields(out):
        value = getattr(out, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING or value != default:
            data[f.name] = value
    return {**data, **extra}


def output(result: UnitResult, kind: type[T], *, stage: str, index: int | None = None) -> T:
    """``result.data`` as a ``kind``, every field checked (the module docstring); other keys are ignored."""
    data = result.data if isinstance(result.data, dict) else {}
    where = f"stage {stage!r}" + (f", unit {index}" if index is not None else "")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name not in data:
            if required:
                raise StageError(f"{where}: its output has no {f.name!r} (a {kind.__name__} output needs "
                                 f"{_names(kind)}; it has {', '.join(sorted(data)) or 'nothing'})")
            continue
        value = data[f.name]
        if not _fits(value, _hints(kind)[f.name]):
            raise StageError(f"{where}: {f.name!r} of its {kind.__name__} output is {type(value).__name__} {value!r}, "
                             f"expected {_hints(kind)[f.name]}")
        values[f.name] = value
    return kind(**values)


def outputs(results: list[UnitResult], kind: type[T], *, stage: str) -> list[T]:
    """Every unit's output of one stage, in unit order."""
    return [output(r, kind, stage=stage, index=i) for i, r in enumerate(results)]


def _names(kind: type) -> str:
    return ", ".join(f.name for f in dataclasses.fields(kind))


def _hints(kind: type) -> dict[str, Any]:
    return get_type_hints(kind)


def _fits(value: Any, hint: Any) -> bool:
    options = hint.__args__ if isinstance(hint, types.UnionType) else (hint,)
    for option in options:
        if option is type(None) and value is None:
            return True
        base = getattr(option, "__origin__", option)
        if base is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if base is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if isinstance(base, type) and base not in (int, float) and isinstance(value, base):
            return True
    return False
