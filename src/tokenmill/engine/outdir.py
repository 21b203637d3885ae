"""Guards around a run's output directory: what may be written or deleted there, and by whom.

* **Where.** ``--out`` must be a directory (or not exist yet), must not be an input, must not hold an
  input and must not lie inside an input directory: a run never reads its own output back, and
  ``--overwrite`` can never reach an input.
* **What.** A run refuses a non-empty directory that is not a tokenmill output (no ``_state/job.json``
  or ``_state/<stage>/run.json``), with or without ``--overwrite``, and an output of another workflow
  (``tokenmill curate`` into a ``tokenmill pretrain`` output) unless ``--overwrite`` is given.
  ``_state/job.json`` names the workflow that wrote the directory.
* **What is deleted.** ``--overwrite`` removes only the names tokenmill writes (``_state/``,
  ``manifest.json``, ``rejects.jsonl``, ``shard-*`` files, ``documents/``, ``ledger/``, ``val/``, ...);
  anything else in the directory stays.
* **Who.** A run holds an exclusive ``flock`` on ``_state/lock`` from before it clears or resumes the
  directory until its manifest is written; a second run into the same ``--out`` is refused at once,
  naming the process that holds it. The lock is released by the kernel when the process dies, so a run
  killed with ``kill -9`` never leaves a stale lock.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tokenmill.base.files import atomic_write
from tokenmill.errors import ConfigError

STATE = "_state"
LOCK = "lock"
RUN_FILE = "run.json"
JOB_FILE = "job.json"  # {"workflow": "pretrain"}: which command wrote the directory
OWN_FILES = ("manifest.json", "manifest.json.tmp", "rejects.jsonl", "rejects.jsonl.tmp", "report.html",
             "decontamination.json", "selected.jsonl", "selection.parquet", "datacard.md", "datacard.json",
             "plan.json", "plan.html")
# directories only tokenmill writes inside its outputs: curation documents and ledgers, corpus-step work
# files, synthetic conversations, validation shards
OWN_DIRS = ("documents", "ledger", "steps", "_work", "conversations", "val")
OWN_PATTERN = re.compile(r"^shard-\d{6}-\d{4}\.(ids|mask|weights|idx|docs|json)(\.tmp)?$")


def check_output_path(out: str | os.PathLike, inputs: Iterable[str]) -> None:
    """Refuse an ``--out`` that is a file, is an input, holds an input or lies inside an input directory."""
    target = Path(out)
    if target.exists() and not target.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; give a directory path for the shards")
    resolved = _real(target)
    for given in inputs:
        from tokenmill.io.formats import local_path  # io sits above the engine: imported when used

        local = local_path(given)
        if local is None:
            continue
        source = _real(Path(local))
        if source == resolved or _inside(source, resolved):
            raise ConfigError(f"--out {out} holds the input {given}; write the output to a directory of its own")
        if _inside(resolved, source):
            raise ConfigError(f"--out {out} lies inside the input directory {given}; a later run would read "
                              "its own output back: choose an --out outside every input")


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, directory: Path) -> bool:
    return path != directory and directory in path.parents


def is_tokenmill_output(out: Path) -> bool:
    """A directory a tokenmill run wrote: ``_state/job.json``, or a stage's ``_state/<stage>/run.json`` (or the
    older ``_state/run.json``)."""
    state = out / STATE
    return (state / JOB_FILE).is_file() or (state / RUN_FILE).is_file() or any(state.glob(f"*/{RUN_FILE}"))


def written_by(out: Path) -> str | None:
    """The workflow that wrote ``out`` (``_state/job.json``; for older outputs the manifest's ``track``)."""
    for path, key in ((out / STATE / JOB_FILE, "workflow"), (out / "manifest.json", "track")):
        try:
            value = json.loads(path.read_text()).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, str):
            return value
    return None


def refuse_other_workflow(out: Path, workflow: str, *, overwrite: bool) -> None:
    """Raise when ``out`` holds another workflow's output (``--overwrite`` replaces it)."""
    other = written_by(out) if out.is_dir() else None
    if other is not None and other != workflow and not overwrite:
        raise ConfigError(f"--out {out} holds the output of `tokenmill {other}`; `tokenmill {workflow}` writes to a "
                          "directory of its own: choose another --out (or pass --overwrite to replace it)")


def clear_output(out: Path) -> None:
    """Delete what an earlier tokenmill run wrote in ``out``; refuse a directory tokenmill did not make.

    An empty or missing directory is fine. Names tokenmill does not write are left in place.
    """
    refuse_foreign(out)
    if not out.is_dir():
        return
    for entry in _entries(out):
        if entry.name == STATE:
            _clear_state(entry)
        elif entry.name in OWN_FILES or OWN_PATTERN.match(entry.name):
            entry.unlink()
        elif entry.name in OWN_DIRS and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)


def refuse_foreign(out: Path, *, overwrite: bool = True) -> None:
    """Raise unless ``out`` is missing, empty (but for a lock file) or a tokenmill output."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; give a directory path for the shards")
    entries = _entries(out) if out.is_dir() else []
    if entries and not is_tokenmill_output(out):
        names = ", ".join(sorted(e.name for e in entries)[:5])
        what = f"--overwrite refuses to clear {out}" if overwrite else f"--out {out} is refused"
        raise ConfigError(f"{what}: it is not empty ({names}) and is not a tokenmill output (no {STATE}/{JOB_FILE}); "
                          "tokenmill writes only into a new or empty directory or one it wrote: choose another --out")


def _entries(out: Path) -> list[Path]:
    return [e for e in out.iterdir() if not (e.name == STATE and _only_lock(e))]


def _only_lock(state: Path) -> bool:
    return state.is_dir() and all(e.name == LOCK for e in state.iterdir())


def _clear_state(state: Path) -> None:
    """Everything under ``_state/`` but the lock file, which must keep its inode while it is held."""
    for entry in state.iterdir():
        if entry.name == LOCK:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def check_target(out: Path, *, overwrite: bool, workflow: str | None = None) -> None:
    """The refusals of :func:`hold_output`, made without writing anything."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; give a directory path for the shards")
    if overwrite or workflow is not None:  # the engine alone (no workflow named) writes where it is told
        refuse_foreign(out, overwrite=overwrite)
    if workflow is not None:
        refuse_other_workflow(out, workflow, overwrite=overwrite)


@contextmanager
def hold_output(out: str | os.PathLike, *, overwrite: bool, workflow: str | None = None) -> Iterator[Path]:
    """Lock ``out`` for this process (refusing when another run holds it), clear it when ``overwrite``.

    Refused before anything is written, for a named ``workflow`` (every command) or with ``overwrite``: a
    non-empty directory tokenmill did not write; for a ``workflow`` (unless ``overwrite``), the output of
    another workflow. ``workflow`` is recorded in
    ``_state/job.json``.
    """
    out = Path(out)
    check_target(out, overwrite=overwrite, workflow=workflow)
    (out / STATE).mkdir(parents=True, exist_ok=True)
    with _flock(out / STATE / LOCK, out):
        if overwrite:
            clear_output(out)
        if workflow is not None:
            atomic_write(out / STATE / JOB_FILE, json.dumps({"workflow": workflow}).encode())
        yield out


@contextmanager
def _flock(path: Path, out: Path) -> Iterator[None]:
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise ConfigError(f"--out {out} is in use by another tokenmill run (pid {holder}); wait for it to "
                              "finish or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
