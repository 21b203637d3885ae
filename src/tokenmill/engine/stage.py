"""Stages, units and results: the vocabulary every workflow and every executor shares.

A *workflow* is an ordered list of :class:`Stage`. A stage is a name with a version and a planner; the
planner runs in the driver, sees the committed results of the earlier stages (:class:`StageContext`) and
returns a :class:`StagePlan`: the stage's units, the picklable task that processes one unit, and the
parameters that make its output what it is (they enter the stage's fingerprint, chained to the previous
stage's). Units are opaque to the engine: an index, a stable name, a size hint for progress, and a
payload only the task understands (a byte range of a file, a hash-range partition, ...).

A task is ``task(unit, staging) -> UnitResult``. It writes its files under ``staging``, laid out like the
run's output directory; the executor commits them (rename, then a completion marker) and returns the
result. A task may define ``setup()``: the executor calls it once per worker process before the first
unit (load a language-ID model, build an encoder), so heavy resources are never pickled per unit.

Intermediate files of corpus-wide stages (signatures, bucket partitions) go under ``_work/<stage>/`` by
convention; they are tokenmill's own. A plan names, in ``drop``, the directories of intermediates that
no stage after it reads: the engine removes them once the stage has ended (``engine/workflow.py``), so a
finished run leaves no intermediate behind. Planners read the results of earlier stages, never their
files, so a resumed run plans every stage again without the dropped ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from tokenmill.base.accounting import Stats
from tokenmill.errors import StageError


@dataclass(frozen=True)
class Unit:
    """One piece of a stage's work. ``name`` is unique within the stage and fixes output names."""

    index: int
    name: str
    size: int = 0  # bytes (or any weight) for progress and ETA; 0 when unknown
    payload: Any = None  # opaque to the engine; must pickle


@dataclass
class UnitResult:
    """What one unit reports. Summable with ``+`` (``data`` is per unit and is not summed)."""

    stats: Stats = field(default_factory=Stats)
    outputs: list[str] = field(default_factory=list)  # committed files, relative to the output directory
    data: dict[str, Any] = field(default_factory=dict)  # stage-specific, JSON-able (shard headers, partials)
    peak_rss_mb: float = 0.0  # of the worker process that ran the unit
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # CPU time (all threads) of the worker process while it ran the unit
    step_seconds: Counter = field(default_factory=Counter)  # time spent per step, by step name

    def __add__(self, other: UnitResult) -> UnitResult:
        return UnitResult(
            stats=self.stats + other.stats,
            outputs=self.outputs + other.outputs,
            peak_rss_mb=max(self.peak_rss_mb, other.peak_rss_mb),
            seconds=self.seconds + other.seconds,
            cpu_seconds=self.cpu_seconds + other.cpu_seconds,
            step_seconds=self.step_seconds + other.step_seconds,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "stats": self.stats.to_dict(),
            "outputs": list(self.outputs),
            "data": self.data,
            "peak_rss_mb": self.peak_rss_mb,
            "seconds": round(self.seconds, 6),
            "cpu_seconds": round(self.cpu_seconds, 6),
            "step_seconds": {k: round(v, 6) for k, v in sorted(self.step_seconds.items())},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UnitResult:
        return cls(
            stats=Stats.from_dict(d["stats"]),
            outputs=list(d.get("outputs", [])),
            data=dict(d.get("data", {})),
            peak_rss_mb=float(d.get("peak_rss_mb", 0.0)),
            seconds=float(d.get("seconds", 0.0)),
            cpu_seconds=float(d.get("cpu_seconds", 0.0)),
            step_seconds=Counter(d.get("step_seconds", {})),
        )


def total(results: list[UnitResult]) -> UnitResult:
    """The sum of a stage's results (an empty result for no units)."""
    acc = UnitResult()
    for r in results:
        acc = acc + r
    return acc


class Task(Protocol):
    def __call__(self, unit: Unit, staging: Path) -> UnitResult: ...


@dataclass(frozen=True)
class StageContext:
    """What a planner may look at: the output directory and the committed results of earlier stages."""

    out: Path
    results: dict[str, list[UnitResult]]  # stage name -> results in unit order

    def work_dir(self, stage: str) -> Path:
        """Where stage ``stage`` keeps its intermediate files (``<out>/_work/<stage>``)."""
        return self.out / "_work" / stage


@dataclass(frozen=True)
class StagePlan:
    units: list[Unit]
    task: Task
    params: dict[str, Any] = field(default_factory=dict)  # JSON-able; enters the stage fingerprint
    # directories (relative to the output) that only this stage and the ones before it read: removed once
    # this stage has ended; never the run's state or a path outside the output
    drop: tuple[str, ...] = ()
    # directories (relative to the output, ``*`` for any one name) whose files its units write as intermediates
    # a later stage reads and drops: they go to per-process segment files (base/segments.py), as do the
    # directories the task names (its ``segments``)
    segments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for rel in (*self.drop, *self.segments):
            parts = PurePosixPath(rel).parts
            if not parts or PurePosixPath(rel).is_absolute() or ".." in parts or parts[0] == "_state":
                raise StageError(f"a stage may drop directories inside its output only, not {rel!r}")


@dataclass(frozen=True)
class Stage:
    """A named, versioned step of a workflow. ``plan`` runs in the driver, after the earlier stages."""

    name: str
    version: int
    plan: Callable[[StageContext], StagePlan]

    @property
    def key(self) -> str:
        return stage_key(self.name, self.version)


def stage_key(name: str, version: int) -> str:
    """``<name>_v<version>``: where a stage's state lives (``_state/<key>``), and how a manifest lists it."""
    return f"{name}_v{version}"
