"""A stage's commit journal: the units committed while it runs, in one append-only file per process.

A unit commits (:func:`tokenmill.engine.local.commit_unit`) by moving its files into place and then
appending one line, ``{"unit": name, "result": ...}``, to the journal of the process that ran it:
``_state/<stage>/done/<run>.<host>-<pid>-<nonce>.jsonl``, opened once and kept open while the process works
on the stage, the line written in one call and fsynced before the unit counts as done. A stage of 100,000
units run by 64 workers writes 64 journal files, not 100,000 markers; the files it leaves once it has ended
are its ``index.jsonl`` and ``run.json`` (``engine/workflow.py``).

Every process writes only its own file, so no two writers share one (appends to one file from several hosts
of a shared filesystem are not atomic), and the name is the run's, the host's and the process's with a
nonce: a process started later never appends to a file a killed one left, whatever its pid.

**Reading** (:func:`committed_results`): a line counts when it ends with its newline and parses; the line a
process was writing when it was killed has neither, and its unit is redone (it overwrites the same output
names with the same bytes). A unit found twice (a unit redone after its worker's node was lost, whose first
commit had landed) keeps its first line: both are the same result. ``done/<unit>.json`` markers are read
too: an output on object storage keeps one marker key per unit (object storage has no append), downloaded
into ``done/`` by a resume, and a run of an earlier version left them.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

from tokenmill.base.files import fsync_dir

SUFFIX = ".jsonl"
_held: tuple[str, int] | None = None  # this process's open journal: (path, descriptor), one at a time
_nonce: tuple[int, str] = (-1, "")  # (pid, nonce): a forked child draws its own
_lock = threading.Lock()  # units committed from threads of one process append one line at a time


def journal_path(done: Path, run_id: str) -> Path:
    """This process's journal in the stage's ``done/`` directory for the run ``run_id``."""
    global _nonce
    if _nonce[0] != os.getpid():
        _nonce = (os.getpid(), os.urandom(4).hex())
    return done / f"{run_id}.{socket.gethostname()}-{_nonce[0]}-{_nonce[1]}{SUFFIX}"


def append(done: Path, run_id: str, unit: str, result: dict, files: list[dict] | None = None) -> None:
    """Record ``unit`` as committed with ``result``: one line appended to this process's journal, fsynced.
    ``files``: where the unit's files in segments lie (:mod:`tokenmill.base.segments`)."""
    global _held
    row: dict = {"unit": unit, "result": result}
    if files:
        row["files"] = files
    line = json.dumps(row, sort_keys=True).encode() + b"\n"
    with _lock:
        path = str(journal_path(done, run_id))
        if _held is None or _held[0] != path:
            _close()  # the previous stage's journal: a process works on one stage at a time
            done.mkdir(parents=True, exist_ok=True)
            _held = (path, os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
            fsync_dir(done)  # the new file's name is durable before the first unit counts on it
        fd = _held[1]
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)


def close() -> None:
    """Close this process's journal (the next :func:`append` opens the file of its stage and run)."""
    with _lock:
        _close()


def _close() -> None:
    global _held
    if _held is not None:
        os.close(_held[1])
        _held = None


def committed_results(done: Path) -> dict[str, dict]:
    """Every committed unit's result by unit name, from the journals and markers in ``done/`` (module docstring);
    an absent directory has none."""
    found: dict[str, dict] = {}
    try:
        with os.scandir(done) as entries:
            names = sorted(e.name for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return found
    for name in names:
        if name.endswith(SUFFIX):
            for row in _lines(done / name):
                found.setdefault(row["unit"], row["result"])
        elif name.endswith(".json"):
            result = _marker(done / name)
            if result is not None:
                found.setdefault(name[:-len(".json")], result)
    return found


def committed_files(done: Path) -> list[dict]:
    """The segment records (:mod:`tokenmill.base.segments`) of every committed unit, from the line that
    counts for it (its first, as :func:`committed_results`)."""
    seen: set[str] = set()
    files: list[dict] = []
    try:
        with os.scandir(done) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(SUFFIX))
    except (FileNotFoundError, NotADirectoryError):
        return files
    for name in names:
        for row in _lines(done / name):
            if row["unit"] not in seen:
                seen.add(row["unit"])
                files.extend(f for f in row.get("files") or () if isinstance(f, dict))
    return files


def _lines(path: Path):
    try:
        with open(path, "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    return  # the line being written when its process was killed
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict) and isinstance(row.get("unit"), str) and isinstance(row.get("result"), dict):
                    yield row
    except OSError:
        return


def _marker(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None  # torn or missing marker: the unit is redone
    return value if isinstance(value, dict) else None

