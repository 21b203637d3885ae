"""The last stage of a curate run: the decision ledger joined in the workers, the stages' parts packed.

Every curation stage leaves one ledger part per input unit (``steps/<stage>/ledger/<unit>.parquet``). This
stage (``ledger``) runs after them, in the run's workers like any other, over **packs**: runs of
consecutive input units holding at most :data:`PACK_INPUT_BYTES` of input and :data:`PACK_UNITS` units
(fixed by the input alone, so the files and their bytes do not depend on the number of workers). For each
unit of its pack a task joins the unit's parts and rejects into ``ledger/<unit>.parquet``
(:mod:`tokenmill.report.ledger`: the same bytes as the join in the driver it replaces); then it writes, per
stage, one stored zip of the pack's parts, ``steps/<stage>/ledger-<pack>.zip``, each member the unit's part
byte for byte. Once the stage has ended the loose parts' directories are dropped (``StagePlan.drop``): a
finished run leaves per stage one file per pack, not one per unit, and every reader of the parts finds them
in the packs (:func:`tokenmill.report.ledger.part_exists`).

Why here and not in the driver: the driver's memory stays what planning needs whatever the size of a unit
(the join of one unit's parts is the largest thing the end of a run held), and the join runs in parallel
over the packs. A kill is safe at every point: until the stage ends the loose parts are all there and a
pack is redone from them; after it, the packs are complete and the drop is finished by the next run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tokenmill.base import segments
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.report.ledger import add_entry, ledger_schema, new_entry, pack_name, parts_by_unit, write_pack, write_unit

STAGE = "ledger"
VERSION = 1
PACK_INPUT_BYTES = 16 << 30  # input bytes per pack (about 1.5 GB of parts per stage for the dclm preset)
PACK_UNITS = 1024  # and at most this many units, so a pack's join stays a bounded piece of work


@dataclass(frozen=True)
class PackUnits:
    """What one pack's task needs: its units' names and, per unit, its parts (relative, in stage order)."""

    names: tuple[str, ...]
    parts: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class JoinTask:
    out: str
    schema: tuple[tuple[str, pa.DataType], ...]  # the run's ledger columns (ledger_schema), the same for every pack
    stage_dirs: tuple[str, ...]  # each stage's parts directory (``steps/<stage>/ledger``), in stage order

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        out, pack = Path(self.out), unit.payload
        schema = dict(self.schema)
        entry = new_entry()
        members: dict[str, list[tuple[str, Path]]] = {d: [] for d in self.stage_dirs}
        for name, rels in zip(pack.names, pack.parts):
            add_entry(entry, write_unit(out, staging, name, [out / r for r in rels], schema))
            for rel in rels:
                folder = Path(rel).parent.as_posix()
                if folder in members and segments.exists(out / rel):
                    members[folder].append((Path(rel).name, out / rel))
        packs = []
        for folder, found in members.items():
            if found:
                rel = pack_name(folder, unit.name)
                write_pack(staging / rel, found)
                packs.append(rel)
        return UnitResult(outputs=[*entry["files"], *packs], data={"ledger": entry, "packs": packs})


def pack_units(sizes: Sequence[int], *, max_bytes: int = PACK_INPUT_BYTES, max_units: int = PACK_UNITS) -> list[list[int]]:
    """Consecutive runs of the units whose input bytes are ``sizes``, of at most ``max_bytes`` and
    ``max_units``, as lists of positions; a unit larger than ``max_bytes`` is a pack alone."""
    packs: list[list[int]] = []
    total = 0
    for k, size in enumerate(sizes):
        size = max(0, int(size or 0))
        if not packs or len(packs[-1]) >= max_units or total + size > max_bytes:
            packs.append([])
            total = 0
        packs[-1].append(k)
        total += size
    return packs


def join_stage(out: Path, unit_names: Sequence[str], unit_sizes: Sequence[int],
               stage_ledgers: Callable[[StageContext], dict[str, list[str]]]) -> Stage:
    """The ``ledger`` stage of a run whose input units are ``unit_names`` (sizes in input bytes);
    ``stage_ledgers(ctx)``: each earlier stage's ledger parts, from their committed results."""
    def plan(ctx: StageContext) -> StagePlan:
        parts = stage_ledgers(ctx)
        by_unit = parts_by_unit(out, parts, unit_names)
        stage_dirs = tuple(dict.fromkeys(Path(rel).parent.as_posix() for files in parts.values() for rel in files))
        units = []
        for k, members in enumerate(pack_units(unit_sizes, max_bytes=PACK_INPUT_BYTES, max_units=PACK_UNITS)):
            names = tuple(unit_names[i] for i in members)
            rels = tuple(tuple(str(p.relative_to(out).as_posix()) for p in by_unit[n]) for n in names)
            units.append(Unit(k, f"{k:06d}", sum(unit_sizes[i] for i in members), payload=PackUnits(names, rels)))
        schema = tuple(ledger_schema(by_unit).items())
        task = JoinTask(str(out), schema, stage_dirs)
        drop = tuple(d for d in stage_dirs if d.startswith("steps/") and d.endswith("/ledger"))
        return StagePlan(units, task, {"packs": [list(u.payload.names) for u in units]}, drop=drop)

    return Stage(STAGE, VERSION, plan)


def decision_ledger(results: Sequence[UnitResult]) -> dict:
    """The manifest's ``decision_ledger`` entry from the stage's results (packs in unit order)."""
    entry = new_entry()
    for r in results:
        add_entry(entry, r.data["ledger"])
    return entry


def stage_packs(results: Sequence[UnitResult]) -> list[str]:
    """Every pack archive the stage wrote (relative to the output), packs in unit order, stages in order."""
    return [rel for r in results for rel in r.data.get("packs", [])]
