"""A three-stage workflow shaped like exact dedup, run in its own process so a test can kill it.

``emit``   map, one unit per input part: writes the part's values under ``_work/emit/``
``group``  corpus-wide, one unit per hash partition: reads every part, keeps the first occurrence of each
           value of its partition, writes the kept (part, position) pairs under ``_work/group/``
``apply``  map, one unit per part again: writes the part's kept values to ``final-<part>.txt``

``python -c "import killkit; killkit.main(OUT, WORKERS, SLEEP)"`` runs it; ``SLEEP`` seconds per unit make
each stage last long enough to be killed in.
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

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        time.sleep(self.sleep)
        if self.die_once and unit.index == 3 and not os.path.exists(self.die_once):
            (staging / "half-written").write_text("x")
            Path(self.die_once).touch()
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


def stages(sleep: float, die_once: str = "") -> list[Stage]:
    def plan_emit(ctx):
        return StagePlan([Unit(i, f"part-{i:04d}") for i in range(PARTS)], Emit(sleep, die_once), {"parts": PARTS})

    def plan_group(ctx):
        sources = tuple(r.outputs[0] for r in ctx.results["emit"])
        units = [Unit(p, f"bucket-{p:04d}", payload=p) for p in range(PARTITIONS)]
        return StagePlan(units, Group(str(ctx.out), sources, sleep), {"partitions": PARTITIONS})

    def plan_apply(ctx):
        decisions = tuple(r.outputs[0] for r in ctx.results["group"])
        return StagePlan([Unit(i, f"part-{i:04d}") for i in range(PARTS)], Apply(str(ctx.out), decisions, sleep))

    return [Stage("emit", 1, plan_emit), Stage("group", 1, plan_group), Stage("apply", 1, plan_apply)]


def main(out: str, workers: int, sleep: float) -> None:
    with LocalExecutor(workers=workers) as ex:
        run_workflow(stages(sleep), out=out, fingerprint="dedup-example", executor=ex)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
