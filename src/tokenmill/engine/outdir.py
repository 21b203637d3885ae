"""Guards around a run's output directory: what may be written or deleted there, and by whom.

* **Where.** ``--out`` must be a directory (or not exist yet), must not be an input, must not hold an
  input and must not lie inside an input directory: a run never reads its own output back, and
  ``--overwrite`` can never reach an input.
* **What.** A run refuses a non-empty directory that is not a tokenmill output (no ``_state/job.json``
  or ``_state/<stage>/run.json``), with or without ``--overwrite``, and an output of another workflow
  (``tokenmill curate`` into a ``tokenmill pretrain`` output) unless ``--overwrite`` is given.
  ``_state/job.json`` names the workflow that wrote the directory.
* **What is deleted.** ``--overwrite`` removes exactly the files earlier runs recorded as written, and
  ``_state/``; anything else in the directory stays, whatever its name. The record is
  ``_state/written.json`` (:func:`recording`): a run opens it, before it writes anything, with the files
  already there that tokenmill did not write, and closes it, when its block ends (returning or raising),
  with every file it wrote outside ``_state/`` (a file written is one that appeared or changed while the
  run held the directory). The files a stage's units committed are not listed there: the engine's
  ``_state/<stage>/done/`` journals and ``index.jsonl`` hold each committed unit's ``outputs``. A run
  killed with ``kill -9`` leaves its record open: the next run claims, among the files that appeared or
  changed since, those of the names tokenmill reserves for its own (``manifest.json``, ``rejects.jsonl``,
  ``report.html``, ``shard-*``, ``documents/``, ...: what a finalize writes), so a killed run's files are
  removed too, and a file a user had there before that run, or adds under another name, never is. (Two
  limits: a user's file of a reserved name added after the kill and before the next run is taken for the
  killed run's, and a file added while a run holds the directory counts as that run's.) A directory an
  older tokenmill wrote has no record: ``--overwrite`` refuses it rather than guess at names (a resume,
  which deletes nothing, starts its record), unless all it holds is ``_state/`` (an object-storage run's
  work directory).
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
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tokenmill.base.files import atomic_write
from tokenmill.engine.journal import committed_results
from tokenmill.errors import ConfigError

STATE = "_state"
LOCK = "lock"
RUN_FILE = "run.json"
JOB_FILE = "job.json"  # {"workflow": "pretrain"}: which command wrote the directory
WRITTEN = "written.json"  # the record of the files tokenmill wrote here (module docstring)
# what a kill -9 during one of tokenmill's own atomic writes of its state leaves: never a sign of a foreign folder
STATE_LEFTOVERS = (f"{JOB_FILE}.tmp", f"{WRITTEN}.tmp")
OWN_FILES = ("manifest.json", "manifest.json.tmp", "rejects.jsonl", "rejects.jsonl.tmp", "report.html",
             "decontamination.json", "selected.jsonl", "selection.parquet", "datacard.md", "datacard.json",
             "plan.json", "plan.html")
# directories only tokenmill writes inside its outputs: curation documents and ledgers, corpus-step work
# files, synthetic conversations, validation shards
OWN_DIRS = ("documents", "ledger", "steps", "_work", "conversations", "val")
OWN_PATTERN = re.compile(r"^shard-\d{6}-\d{4}\.(ids|mask|weights|idx|docs|json)(\.tmp)?$")
Stat = tuple[int, int, int]  # inode, mtime (ns), size: a file rewritten in place or replaced differs


def check_output_path(out: str | os.PathLike, inputs: Iterable[str]) -> None:
    """Refuse an ``--out`` that is a file, is an input, holds an input or lies inside an input directory.

    Every input's real path is compared (links resolved), each directory's resolved once: a run over 10,000 files
    of one folder resolves one folder, and the links among the files."""
    from tokenmill.io.formats import local_path  # io sits above the engine: imported when used

    target = Path(out)
    if target.exists() and not target.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; give a directory path for the shards")
    resolved = os.path.realpath(target)
    folders: dict[str, str] = {}
    for given in inputs:
        local = local_path(given)
        if local is None:
            continue
        source = _real_in(local, folders)
        if source == resolved or _under(source, resolved):
            raise ConfigError(f"--out {out} holds the input {given}; write the output to a directory of its own")
        if _under(resolved, source):
            raise ConfigError(f"--out {out} lies inside the input directory {given}; a later run would read "
                              "its own output back: choose an --out outside every input")


def _real_in(path: str, folders: dict[str, str]) -> str:
    """``os.path.realpath(path)``, its folder's real path taken from (and kept in) ``folders``."""
    head, tail = os.path.split(os.path.join(os.getcwd(), path))  # not normalised: realpath resolves links before ..
    if tail in ("", ".", ".."):
        return os.path.realpath(path)
    if head not in folders:
        folders[head] = os.path.realpath(head)
    joined = os.path.join(folders[head], tail)
    return os.path.realpath(joined) if os.path.islink(joined) else joined


def _under(path: str, directory: str) -> bool:
    """``path`` lies strictly inside ``directory`` (both real, absolute)."""
    return path != directory and path.startswith(directory.rstrip(os.sep) + os.sep)


def is_tokenmill_output(out: Path) -> bool:
    """A directory a tokenmill run wrote: ``_state/job.json`` or ``_state/written.json``, or a stage's
    ``_state/<stage>/run.json`` (or the older ``_state/run.json``)."""
    state = out / STATE
    return any((state / name).is_file() for name in (JOB_FILE, WRITTEN, RUN_FILE)) or any(state.glob(f"*/{RUN_FILE}"))


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


# ---- the record of what tokenmill wrote -----------------------------------------------------------------

def read_record(out: Path) -> dict | None:
    """``_state/written.json`` (``files``, ``dirs``, and ``open`` while a run holds it), or None when there is
    none (an older tokenmill's output, or a directory no run has taken yet)."""
    try:
        record = json.loads((out / STATE / WRITTEN).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("files"), list):
        return None
    return {"files": [f for f in record["files"] if isinstance(f, str)],
            "dirs": [d for d in record.get("dirs", []) if isinstance(d, str)],
            **({"open": record["open"]} if isinstance(record.get("open"), dict) else {})}


def _write_record(out: Path, files: Iterable[str], dirs: Iterable[str], *, opened: dict | None = None) -> None:
    record = {"files": sorted(files), "dirs": sorted(dirs), **({"open": opened} if opened is not None else {})}
    replace_file(out / STATE / WRITTEN, json.dumps(record).encode())


def replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` through a temporary sibling renamed over it, without an fsync: a killed process leaves
    the old file or the new one, never part of one; a power cut may lose the record, which is then taken
    for an older tokenmill's output (``--overwrite`` refuses it, nothing is deleted). Two fsyncs per run
    cost about 25 ms of every command's start on this machine's disk."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@contextmanager
def recording(out: Path) -> Iterator[None]:
    """Record in ``_state/written.json`` the files written in ``out`` while the block runs (the caller holds
    the lock): opened before anything is written, closed when the block ends, either way."""
    record = _settled(out)
    ours, units = set(record["files"]), unit_outputs(out)
    start, start_dirs = snapshot(out, skip=units)
    before = {rel: list(stat) for rel, stat in start.items() if rel not in ours}
    _write_record(out, ours, record["dirs"], opened={"pid": os.getpid(), "before": before})
    try:
        yield
    finally:
        end, end_dirs = snapshot(out, skip=unit_outputs(out))
        written = {rel for rel, stat in end.items() if rel in ours or start.get(rel) != stat}
        dirs = {d for d in end_dirs if d in record["dirs"] or d not in start_dirs}
        try:
            _write_record(out, written, dirs)
        except OSError:
            pass  # the record stays open: the next run claims what this one wrote, as after a kill


def written_now(out: Path) -> set[str]:
    """The files outside ``_state/`` that runs recorded as written in ``out``, this one's so far included (its
    record is open: the files that appeared or changed since it opened it), and the units' outputs: what a
    run into object storage publishes at its end."""
    record = read_record(out) or {"files": []}
    opened = record.get("open") or {}
    before = opened["before"] if isinstance(opened.get("before"), dict) else {}
    now, _ = snapshot(out, skip=())
    ours = set(record["files"])
    return {rel for rel, stat in now.items() if rel in ours or before.get(rel) != list(stat)} | (unit_outputs(out) & set(now))


def _settled(out: Path) -> dict:
    """The record, with what a killed run (its record still open) wrote claimed: the files of tokenmill's
    reserved names that appeared or changed since it opened the record; an empty one where there is none."""
    record = read_record(out)
    if record is None:
        return {"files": [], "dirs": []}
    opened = record.pop("open", None)
    if opened is None:
        return record
    before = opened.get("before") if isinstance(opened.get("before"), dict) else {}
    now, _ = snapshot(out, skip=unit_outputs(out))
    claimed = {rel for rel, stat in now.items() if _reserved(rel) and before.get(rel) != list(stat)}
    return {"files": sorted(set(record["files"]) | claimed), "dirs": record["dirs"]}


def _reserved(rel: str) -> bool:
    """A name tokenmill reserves for its own files (what a finalize writes), or its temporary sibling."""
    parts = rel.split("/")
    name = parts[0][: -len(".tmp")] if len(parts) == 1 and parts[0].endswith(".tmp") else parts[0]
    if len(parts) > 1:
        return name in OWN_DIRS
    return name in OWN_FILES or bool(OWN_PATTERN.match(name))


def snapshot(out: Path, *, skip: Collection[str] = ()) -> tuple[dict[str, Stat], set[str]]:
    """Every file (and symbolic link) below ``out`` but those in ``skip`` (the units' outputs: never a stat
    per shard) with its stat, and every directory, by path relative to ``out``; never ``_state/`` nor a
    directory inside that is a tokenmill output of its own (its own record)."""
    files: dict[str, Stat] = {}
    dirs: set[str] = set()
    for root, subdirs, names in os.walk(out):
        rel_root = os.path.relpath(root, out)
        prefix = "" if rel_root == "." else rel_root + "/"
        keep = []
        for d in subdirs:
            path = os.path.join(root, d)
            if os.path.islink(path):
                names.append(d)
            elif not (prefix == "" and d == STATE) and not os.path.isdir(os.path.join(path, STATE)):
                keep.append(d)
                dirs.add(prefix + d)
        subdirs[:] = keep
        for n in names:
            if prefix + n in skip:
                continue
            try:
                st = os.lstat(os.path.join(root, n))
            except OSError:
                continue
            files[prefix + n] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return files, dirs


def unit_outputs(out: Path) -> set[str]:
    """The files the engine's units committed in ``out`` (outside ``_state/``), from every stage's
    journals and markers under ``done/`` and ``index.jsonl``: what a run killed before its end wrote, too."""
    found: set[str] = set()
    state = out / STATE
    for stage in (p for p in state.iterdir() if p.is_dir()) if state.is_dir() else ():
        results = [row.get("result") if isinstance(row, dict) else None for row in _json_lines(stage / "index.jsonl")]
        results.extend(committed_results(stage / "done").values())
        for result in results:
            outputs = result.get("outputs") if isinstance(result, dict) else None
            found.update(o for o in outputs or () if isinstance(o, str) and not o.startswith(STATE + "/"))
    return found


def _json_lines(path: Path) -> Iterator[object]:
    try:
        with open(path, "rb") as fh:
            for line in fh:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
    except OSError:
        return


# ---- clearing -------------------------------------------------------------------------------------------

def clear_output(out: Path) -> None:
    """Delete what earlier tokenmill runs wrote in ``out`` (their record and their units' outputs) and their
    ``_state/``; refuse a directory tokenmill did not make, and one an older tokenmill made with no record.

    An empty or missing directory is fine. A file the record does not name stays, whatever its name.
    """
    refuse_foreign(out)
    if not out.is_dir():
        return
    if read_record(out) is None and any(e.name != STATE for e in out.iterdir()):
        raise ConfigError(f"{out} was written by an older tokenmill that kept no record of the files it wrote "
                          f"({STATE}/{WRITTEN}), so they cannot be told from yours and tokenmill will not clear it "
                          "(--overwrite, or a rerun of plan or demo): delete what you no longer need yourself, or "
                          "choose another --out")
    record = _settled(out)
    for rel in sorted(set(record["files"]) | unit_outputs(out)):
        _remove_file(out, rel)
    for rel in sorted(record["dirs"], key=lambda d: -d.count("/")):
        _remove_empty(out, rel)
    _clear_state(out / STATE)
    _write_record(out, (), ())


def _remove_file(out: Path, rel: str) -> None:
    """Delete ``out/rel`` (a file or a link, never a directory nor a path outside ``out``) and the directories
    above it that it leaves empty."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or parts[0] == STATE:
        return
    path = out / rel
    if path.is_dir() and not path.is_symlink():
        return
    path.unlink(missing_ok=True)
    for depth in range(len(parts) - 1, 0, -1):
        if not _remove_empty(out, "/".join(parts[:depth])):
            return


def _remove_empty(out: Path, rel: str) -> bool:
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or parts[0] == STATE:
        return False
    try:
        (out / rel).rmdir()
    except OSError:  # not empty (a user's file stays), already gone, or a file
        return False
    return True


def refuse_foreign(out: Path, *, overwrite: bool = True) -> None:
    """Raise unless ``out`` is missing, empty (but for tokenmill's lock and leftovers) or a tokenmill output."""
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
    """``_state/`` holding nothing but the lock and what a killed run's own state writes left (``job.json.tmp``)."""
    return state.is_dir() and not state.is_symlink() and all(e.name in (LOCK, *STATE_LEFTOVERS) for e in state.iterdir())


def _clear_state(state: Path) -> None:
    """Everything under ``_state/`` but the lock file, which must keep its inode while it is held, and the
    record, which is rewritten in place (never absent while files it names may be left)."""
    for entry in state.iterdir():
        if entry.name in (LOCK, WRITTEN):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _drop_leftovers(state: Path) -> None:
    """Remove the temporary files a killed run's own state writes left (the caller holds the lock)."""
    for name in STATE_LEFTOVERS:
        (state / name).unlink(missing_ok=True)


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
    """Lock ``out`` for this process (refusing when another run holds it), clear it when ``overwrite``, and
    record what the block writes there (:func:`recording`).

    Refused before anything is written, for a named ``workflow`` (every command) or with ``overwrite``: a
    non-empty directory tokenmill did not write; for a ``workflow`` (unless ``overwrite``), the output of
    another workflow. ``workflow`` is recorded in ``_state/job.json``.
    """
    out = Path(out)
    check_target(out, overwrite=overwrite, workflow=workflow)
    (out / STATE).mkdir(parents=True, exist_ok=True)
    with _flock(out / STATE / LOCK, out):
        _drop_leftovers(out / STATE)
        if overwrite:
            clear_output(out)
        with recording(out):
            if workflow is not None:
                atomic_write(out / STATE / JOB_FILE, json.dumps({"workflow": workflow}).encode())
            yield out


@contextmanager
def hold_finished(out: str | os.PathLike, *, command: str, names: Iterable[str]) -> Iterator[Path]:
    """Lock a tokenmill output to add the files ``names`` to it (``tokenmill card``), and record them.

    Refused, before anything is written: a directory tokenmill did not write (whatever it holds), and a
    file of ``names`` there that no tokenmill run recorded as written (a user's own).
    """
    out = Path(out)
    if not out.is_dir():
        raise ConfigError(f"{out} is not a directory; `tokenmill {command}` takes the output directory of a "
                          "tokenmill run")
    if not is_tokenmill_output(out):
        raise ConfigError(f"{out} is not a tokenmill output (no {STATE}/{JOB_FILE}); `tokenmill {command}` writes only "
                          "into a directory a tokenmill run wrote")
    with _flock(out / STATE / LOCK, out):
        _drop_leftovers(out / STATE)
        if read_record(out) is not None:  # an older tokenmill's output: its files of these names are its own
            ours = set(_settled(out)["files"])
            theirs = [n for n in names if (out / n).exists() and n not in ours]
            if theirs:
                raise ConfigError(f"{out / theirs[0]} was not written by tokenmill; `tokenmill {command}` would "
                                  "replace it: move it away first")
        with recording(out):
            yield out


@contextmanager
def hold_path(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of a run writing the file ``path`` (and its siblings ``path.*``): a hidden
    ``.<name>.lock`` beside it, removed when the block ends; a second run is refused at once, naming the
    first. Since the holder removes the lock file as it ends, the file this run opened may be gone by the
    time its lock is granted: it then opens and locks the file now at that path instead."""
    lock = path.with_name(f".{path.name}.lock")
    while True:
        fd = _lock_fd(lock, path)
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the run that held it removed it between our open and our lock: take the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)


@contextmanager
def _flock(path: Path, out: Path) -> Iterator[None]:
    fd = _lock_fd(path, out)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _lock_fd(path: Path, out: Path) -> int:
    """An open descriptor of ``path`` holding its exclusive ``flock``; refused at once when another holds it."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise ConfigError(f"--out {out} is in use by another tokenmill run (pid {holder}); wait for it to "
                          "finish or choose another --out") from None
    return fd
