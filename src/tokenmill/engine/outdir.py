"""Guards around a run's output directory: what may be written or deleted there, and by whom.

* **Where.** ``--out`` must be a directory (or not exist yet), must not be an input, must not hold an
  input and must not lie inside an input directory: a run never reads its own output back, and
  ``--overwrite`` can never reach an input.
* **What is deleted.** ``--overwrite`` refuses a non-empty directory that is not a tokenmill output (no
  ``_state/run.json``), and even then removes only the names tokenmill writes (``_state/``,
  ``manifest.json``, ``rejects.jsonl``, ``shard-*`` files, ``val/``); anything else in the directory stays.
* **Who.** A run holds an exclusive ``flock`` on ``_state/lock`` from before it clears or resumes the
  directory until its manifest is written; a second run into the same ``--out`` is refused at once,
  naming the process that holds it. The lock is released by the kernel when the process dies, so a run
  killed with ``kill -9`` never leaves a stale lock.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tokenmill.errors import ConfigError

STATE = "_state"
LOCK = "lock"
RUN_FILE = "run.json"
OWN_FILES = ("manifest.json", "manifest.json.tmp", "rejects.jsonl", "rejects.jsonl.tmp", "report.html",
             "decontamination.json", "selected.jsonl", "selection.parquet")
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
    """A directory a tokenmill run wrote: a stage's ``_state/<stage>/run.json`` (or the older ``_state/run.json``)."""
    state = out / STATE
    return (state / RUN_FILE).is_file() or any(state.glob(f"*/{RUN_FILE}"))


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


def refuse_foreign(out: Path) -> None:
    """Raise unless ``out`` is missing, empty (but for a lock file) or a tokenmill output."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; give a directory path for the shards")
    entries = _entries(out) if out.is_dir() else []
    if entries and not is_tokenmill_output(out):
        names = ", ".join(sorted(e.name for e in entries)[:5])
        raise ConfigError(f"--overwrite refuses to clear {out}: it is not empty ({names}) and is not a tokenmill "
                          f"output (no {STATE}/{RUN_FILE}); choose an empty or new --out directory")


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


@contextmanager
def hold_output(out: str | os.PathLike, *, overwrite: bool) -> Iterator[Path]:
    """Lock ``out`` for this process (refusing when another run holds it), clear it when ``overwrite``."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; give a directory path for the shards")
    if overwrite:
        refuse_foreign(out)
    (out / STATE).mkdir(parents=True, exist_ok=True)
    with _flock(out / STATE / LOCK, out):
        if overwrite:
            clear_output(out)
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
