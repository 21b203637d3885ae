"""Snapshots of the input files, so that a run never mixes two versions of one input.

A snapshot records, per input file, its size, its modification time (ns) and a hash of a content sample
(the first and last 64 KiB and eight 4 KiB blocks spread between: about 100 KiB read whatever the size).
It is taken when a run starts, saved as ``_state/inputs.json`` and checked:

* **on resume**: a file whose size, mtime or sample changed since the interrupted run started refuses
  the run (its finished units were made from the old bytes), naming the file and what changed;
* **when each work unit ends** (in the worker): a file that changed while the unit read it fails the
  unit, so no half-old, half-new output is ever committed.

Limits: a same-size edit that keeps the mtime (``touch -r``) and misses every sampled block goes
unnoticed; fsspec URLs are checked by size (and mtime where the file system reports one) only.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill.errors import InputError
from tokenmill.io.base import InputFile, WorkUnit

if TYPE_CHECKING:
    from tokenmill.engine.stage import Task, Unit, UnitResult
from tokenmill.io.formats import filesystem, local_path

EDGE = 64 << 10
BLOCK = 4 << 10
BLOCKS = 8
FILE_NAME = "inputs.json"


def file_snapshot(path: str) -> dict[str, Any]:
    """``{"size", "mtime_ns", "sample"}`` of one input file (a ``datasets`` directory: of its files)."""
    local = local_path(path)
    if local is None:
        return _remote_snapshot(path)
    if os.path.isdir(local):
        parts = [file_snapshot(os.path.join(local, n)) for n in sorted(os.listdir(local))]
        digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
        return {"size": sum(p["size"] for p in parts), "mtime_ns": max((p["mtime_ns"] for p in parts), default=0),
                "sample": digest}
    st = os.stat(local)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sample": _sample_hash(local, st.st_size)}


def _sample_hash(path: str, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for offset in _sample_offsets(size):
            fh.seek(offset)
            h.update(fh.read(EDGE if offset in (0, max(0, size - EDGE)) else BLOCK))
    return h.hexdigest()


def _sample_offsets(size: int) -> list[int]:
    if size <= 2 * EDGE + BLOCKS * BLOCK:
        return [0] if size <= EDGE else [0, size - EDGE] if size <= 2 * EDGE else [0, EDGE, size - EDGE]
    step = (size - 2 * EDGE) // (BLOCKS + 1)
    return [0, *(EDGE + step * k for k in range(1, BLOCKS + 1)), size - EDGE]


def _remote_snapshot(path: str) -> dict[str, Any]:
    fs, fs_path = filesystem(path)
    info = fs.info(fs_path)
    mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or ""
    return {"size": int(info.get("size") or 0), "mtime_ns": str(mtime), "sample": ""}


def differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What changed between two snapshots of one file, in words."""
    out = []
    if before["size"] != now["size"]:
        out.append(f"size {before['size']:,} -> {now['size']:,} bytes")
    if before["mtime_ns"] != now["mtime_ns"]:
        out.append("modification time")
    if before["sample"] != now["sample"]:
        out.append("content")
    return out


def take_snapshot(files: list[InputFile]) -> dict[str, dict[str, Any]]:
    """The snapshot of every input, refusing a file that already differs from when it was listed."""
    snap = {}
    for f in files:
        try:
            snap[f.path] = file_snapshot(f.path)
        except OSError as exc:
            raise InputError(f"input {f.path} cannot be read ({exc.strerror or exc}); check it exists and is readable") from exc
        if f.format != "hf_dataset" and snap[f.path]["size"] != f.size:
            raise InputError(f"input {f.path} changed while the run was being planned (size {f.size:,} -> "
                             f"{snap[f.path]['size']:,} bytes); let the writer finish, then run again")
    return snap


def check_resume(state_dir: Path, snap: dict[str, dict[str, Any]]) -> None:
    """Compare with the snapshot saved by an interrupted run in ``state_dir``, or save this one."""
    path = Path(state_dir) / FILE_NAME
    try:
        before = json.loads(path.read_text())
    except (OSError, ValueError):
        before = None
    if before is not None:
        for name, now in snap.items():
            old = before.get(name)
            changed = differences(old, now) if old else ["not part of the earlier run"]
            if changed:
                raise InputError(f"input {name} changed since this run started ({', '.join(changed)}): the units "
                                 "already finished were made from the old bytes; restore the file, or pass "
                                 "--overwrite to start again from the new one")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(FILE_NAME + ".tmp")
    tmp.write_text(json.dumps(snap, sort_keys=True))
    os.replace(tmp, path)


def check_unit_input(unit: WorkUnit, snapshot: dict[str, dict[str, Any]]) -> None:
    """Raise when any file of ``unit`` changed since the run's ``snapshot`` (called when the unit ends)."""
    for file in unit.files:
        try:
            now = file_snapshot(file.path)
        except OSError as exc:
            raise InputError(f"input {file.path} disappeared or became unreadable while {unit.name} read it "
                             f"({exc.strerror or exc}); restore it and run again to resume") from exc
        changed = differences(snapshot[file.path], now)
        if changed:
            raise InputError(f"input {file.path} changed while {unit.name} read it ({', '.join(changed)}); nothing "
                             "of that unit was committed: let the writer finish, then run again (or --overwrite)")


@dataclass(frozen=True)
class CheckedTask:
    """A track's task that checks its unit's input against the run's snapshot before the unit commits."""

    task: Task
    snapshot: dict[str, dict[str, Any]]

    @property
    def output(self) -> type | None:
        """The typed output of the task it checks (``engine/outputs.py``), which the engine checks at commit."""
        return getattr(self.task, "output", None)

    @property
    def segments(self) -> tuple[str, ...]:
        """The segment directories of the task it checks (``base/segments.py``)."""
        return tuple(getattr(self.task, "segments", ()))

    def setup(self) -> None:
        setup = getattr(self.task, "setup", None)
        if callable(setup):
            setup()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        result = self.task(unit, staging)
        work = unit.payload  # an engine unit carries the input's work unit
        check_unit_input(work, self.snapshot)
        return result


def snapshot_inputs(files: list[InputFile], *, state_dir: Path, fingerprint: str) -> dict[str, dict[str, Any]]:
    """Snapshot ``files`` and check them against an interrupted run of the same fingerprint; the snapshot (what
    :class:`CheckedTask` checks each unit's input against).

    Called with the output locked, before the engine resumes or starts the run. A state directory of
    another run (other fingerprint) is left alone: the engine refuses it with its own message.
    """
    snap = take_snapshot(files)
    try:
        previous = json.loads((Path(state_dir) / "run.json").read_text()).get("fingerprint")
    except (OSError, ValueError):
        previous = None
    if previous is None:
        (Path(state_dir) / FILE_NAME).unlink(missing_ok=True)  # a fresh run: no earlier snapshot applies
    if previous in (None, fingerprint) or _same_files(Path(state_dir), snap):
        check_resume(state_dir, snap)  # same files, other settings: a changed file is named, else the engine refuses
    return snap


def _same_files(state_dir: Path, snap: dict) -> bool:
    try:
        return set(json.loads((state_dir / FILE_NAME).read_text())) == set(snap)
    except (OSError, ValueError):
        return False
