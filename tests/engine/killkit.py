"""A three-stage workflow shaped like exact dedup, run in its own process so a test can kill it.

``emit``   map, one unit per input part: writes the part's values under ``_work/emit/``
``group``  corpus-wide, one unit per hash partition: reads every part, keeps the first occurrence of each
           value of its partition, writes the kept (part, position) pairs under ``_work/group/``
``apply``  map, one unit per part again: writes the part's kept values to ``final-<part>.txt``

``group`` drops ``_work/emit/`` once it has ended and ``apply`` drops ``_work/group/``: a finished run leaves
the ``final-*`` files only (and the run's state).

``python -c "import killkit; killkit.main(OUT, WORKERS, SLEEP)"`` runs it; ``SLEEP`` seconds per unit make
each stage last long enough to be killed in. ``DIE_AT`` (:data:`DEATHS`) ends the process with
``os._exit`` at one exact point of the ``group`` stage's end, as a ``kill -9`` landing there would.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tokenmill.base.accounting import Stats
from tokenmill.engine import LocalExecutor, Stage, StagePlan, Unit, UnitResult, run_workflow

PARTS, PARTITIONS, VALUES = 8, 4, 30


def part_values(i: int) -> list[int]:
    return [(i * 7 + j * 3) % 61 for j in range(VALUES)]


@dataclass(frozen=True)
class Emit:
    sleep: float = 0.0
    die_once: str = ""  # a flag file: the first attempt at unit 3 creates it and kills its own process
    die_until: str = ""  # a flag file: every attempt at unit 3 kills its own process until the file exists

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        time.sleep(self.sleep)
        if self.die_once and unit.index == 3 and not os.path.exists(self.die_once):
            (staging / "half-written").write_text("x")
            Path(self.die_once).touch()
            os._exit(1)
        if self.die_until and unit.index == 3 and not os.path.exists(self.die_until):
            (staging / "half-written").write_text("x")
            os._exit(1)
        path = staging / "_work" / "emit" / f"{unit.name}.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(part_values(unit.index)))
        return UnitResult(stats=Stats(input=VALUES, kept=VALUES), outputs=[f"_work/emit/{unit.name}.json"])


@dataclass(frozen=True)
class Group:
    out: str
    sources: tuple[str, ...]
    sleep: float = 0.0

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        time.sleep(self.sleep)
        first: dict[int, list[int]] = {}
        for part, src in enumerate(self.sources):
            for pos, v in enumerate(json.loads((Path(self.out) / src).read_text())):
                if v % PARTITIONS == unit.payload and v not in first:
                    first[v] = [part, pos]
        path = staging / "_work" / "group" / f"{unit.name}.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(sorted(first.values())))
        return UnitResult(data={"kept": len(first)}, outputs=[f"_work/group/{unit.name}.json"])


@dataclass(frozen=True)
class Apply:
    out: str
    decisions: tuple[str, ...]
    sleep: float = 0.0

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        time.sleep(self.sleep)
        keep = {tuple(p) for d in self.decisions for p in json.loads((Path(self.out) / d).read_text())}
        values = part_values(unit.index)
        kept = [v for pos, v in enumerate(values) if (unit.index, pos) in keep]
        (staging / f"final-{unit.index}.txt").write_text("\n".join(map(str, kept)) + "\n")
        stats = Stats(input=len(values), kept=len(kept))
        stats.filter("duplicate", len(values) - len(kept))
        return UnitResult(stats=stats, outputs=[f"final-{unit.index}.txt"])


def stages(sleep: float, die_once: str = "", die_until: str = "") -> list[Stage]:
    def plan_emit(ctx):
        return StagePlan([Unit(i, f"part-{i:04d}") for i in range(PARTS)], Emit(sleep, die_once, die_until),
                         {"parts": PARTS})

    def plan_group(ctx):
        sources = tuple(r.outputs[0] for r in ctx.results["emit"])
        units = [Unit(p, f"bucket-{p:04d}", payload=p) for p in range(PARTITIONS)]
        return StagePlan(units, Group(str(ctx.out), sources, sleep), {"partitions": PARTITIONS}, drop=("_work/emit",))

    def plan_apply(ctx):
        decisions = tuple(r.outputs[0] for r in ctx.results["group"])
        return StagePlan([Unit(i, f"part-{i:04d}") for i in range(PARTS)], Apply(str(ctx.out), decisions, sleep),
                         drop=("_work/group",))

    return [Stage("emit", 1, plan_emit), Stage("group", 1, plan_group), Stage("apply", 1, plan_apply)]


# where ``die_at`` ends the run, all in the driver as the ``group`` stage ends (every unit committed)
DEATHS = ("index-torn", "index-written", "markers-half-removed", "drop-half-done")


def main(out: str, workers: int, sleep: float, die_at: str = "") -> None:
    if die_at:
        _die_at(die_at)
    with LocalExecutor(workers=workers) as ex:
        run_workflow(stages(sleep), out=out, fingerprint="dedup-example", executor=ex)


def _die_at(point: str) -> None:
    """Wrap the engine's writes and removals so the process dies at ``point`` (one of :data:`DEATHS`)."""
    import shutil

    from tokenmill.engine import workflow

    write, rmtree = workflow.atomic_write_lines, shutil.rmtree

    def write_index(path, lines):
        if "group_v1" in str(path) and point == "index-torn":
            with open(path.with_name(path.name + ".tmp"), "wb") as fh:
                fh.write(next(iter(lines)) + b"\n" + b'{"unit": "bucket-00')
            os._exit(1)
        write(path, lines)
        if "group_v1" in str(path) and point == "index-written":
            os._exit(1)

    def remove(path, *args, **kwargs):
        target = {"markers-half-removed": "group_v1/done", "drop-half-done": "_work/emit"}.get(point)
        if target and str(path).endswith(target) and os.path.isdir(path):
            for name in sorted(os.listdir(path))[: len(os.listdir(path)) // 2]:
                os.unlink(os.path.join(path, name))
            os._exit(1)
        rmtree(path, *args, **kwargs)

    workflow.atomic_write_lines = write_index
    workflow.shutil = type("Shutil", (), {"rmtree": staticmethod(remove)})


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:5])
