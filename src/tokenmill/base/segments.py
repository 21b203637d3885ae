"""Segment files: the intermediates of many units appended to one file per worker process.

A stage hands its later stages intermediates: a shuffle unit's ``parts.bin``, the MinHash shingle sets, a
documents stage's copy of the documents and its ledger part. Written one file per unit, they make a run
create and delete files in proportion to its units (1.8 million at 100 TB with 1 GiB units), which is what a
shared filesystem's metadata server pays for. A task names the directories of its intermediates (its
``segments`` attribute: paths relative to the output, each a directory a later stage drops), and so may the
stage's plan (``StagePlan.segments``, ``*`` for any one name: a curate run's ``steps/*/ledger``, the ledger
parts its last stage packs). Its unit writes
those files in its staging directory as before; the commit (:func:`tokenmill.engine.local.commit_unit`)
appends each to the **segment** of that directory held by the process that ran the unit,
``<dir>/seg.<run>.<host>-<pid>-<nonce>.bin`` (each file from a multiple of 64 bytes, so arrays stored in it
stay aligned), fsyncs it, and the unit's journal line names where each file lies: its directory, its name in
it, the segment, the offset and the length. A directory then holds one segment per process that wrote to it,
O(workers) files, not one per unit. With the staging directory on the node's own disk
(``TOKENMILL_SCRATCH``, :func:`scratch_root`), the shared filesystem sees no per-unit file of these stages
at all.

When the stage ends, the driver writes each directory's index, ``<dir>/segments.jsonl`` (one line per file:
``name``, ``segment``, ``offset``, ``length``), from the journals, before the stage's own index: a stage
that has ended has the indexes of its segments. Readers find a file with :func:`locate` (a file at the
path itself, as the stages that do not use segments leave, or its slice of a segment, from the nearest
index above it) and read it with :func:`open_slice`, :func:`memmap` or :func:`arrow_source`.

A killed process leaves in its segment the bytes of a unit it had not committed: no line names them, and the
unit is redone by a new process, into a new segment. A unit committed twice (a lost Ray node's unit redone
after its first commit had landed) keeps its first line, whose bytes are whole: they were synced before it.
The segments go with their directory when the stage that reads them last drops it.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import socket
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmill.base.files import atomic_write_lines, fsync_dir

INDEX = "segments.jsonl"
PREFIX = "seg."
SUFFIX = ".bin"
ALIGN = 64
SCRATCH_ENV = "TOKENMILL_SCRATCH"
_COPY_CHUNK = 64 << 20

_held: dict[str, tuple[str, int]] = {}  # directory -> (segment name, descriptor): this process's open segments
_held_for = ""  # the stage directory the held segments belong to (a process works on one stage at a time)
_held_by = os.getpid()  # the process whose segments these are: a forked child writes its own
_nonce: tuple[int, str] = (-1, "")
_lock = threading.Lock()


def scratch_root() -> Path | None:
    """Where units stage their files when not in the output: ``$TOKENMILL_SCRATCH`` (a directory on each node's
    own disk), or None: in the stage's state directory, beside the output."""
    value = os.environ.get(SCRATCH_ENV, "").strip()
    return Path(value).expanduser() if value else None


def segment_name(run_id: str) -> str:
    global _nonce
    if _nonce[0] != os.getpid():
        _nonce = (os.getpid(), os.urandom(4).hex())
    return f"{PREFIX}{run_id}.{socket.gethostname()}-{_nonce[0]}-{_nonce[1]}{SUFFIX}"


def append_staged(out: Path, staging: Path, directories: Sequence[str], run_id: str,
                  stage_root: Path) -> tuple[list[dict], list[str]]:
    """Append every file staged under one of ``directories`` to this process's segment of that directory, then
    remove the staged file. Returns the records (``dir``, ``name``, ``segment``, ``offset``, ``length``) and the
    staged files left (relative to ``staging``, in sorted order) for the caller to move into place."""
    patterns = [tuple(d.strip("/").split("/")) for d in directories]
    staged = sorted(str(p.relative_to(staging).as_posix()) for p in staging.rglob("*") if p.is_file())
    records: list[dict] = []
    rest: list[str] = []
    with _lock:
        _switch(str(stage_root))
        used: set[int] = set()
        for rel in staged:
            root = _root_of(rel, patterns)
            if root is None:
                rest.append(rel)
                continue
            name, fd = _segment(out / root, run_id)
            offset = _append(fd, staging / rel)
            used.add(fd)
            records.append({"dir": root, "name": rel[len(root) + 1:], "segment": name, "offset": offset,
                            "length": (staging / rel).stat().st_size})
            os.unlink(staging / rel)
        for fd in used:
            os.fsync(fd)
    return records, rest


def _root_of(rel: str, patterns: Sequence[tuple[str, ...]]) -> str | None:
    """The segment directory of the staged file ``rel``: the first pattern its directories match (``*`` matches
    any one name), or None."""
    parts = rel.split("/")
    for pattern in patterns:
        if len(parts) > len(pattern) and all(p == "*" or p == q for p, q in zip(pattern, parts)):
            return "/".join(parts[:len(pattern)])
    return None


def _switch(stage_root: str) -> None:
    """Close the segments of another stage: once its directories are dropped, an open descriptor would keep
    their space on disk. A process forked from one that held segments closes its copies of them: two
    processes never append to one segment."""
    global _held_for, _held_by
    if _held_by != os.getpid():
        _close_all()
        _held_by = os.getpid()
        _held_for = ""
    if _held_for != stage_root:
        _close_all()
        _held_for = stage_root


def close() -> None:
    """Close this process's segments (the next commit opens those of its stage)."""
    with _lock:
        _close_all()


def _close_all() -> None:
    for _name, fd in _held.values():
        os.close(fd)
    _held.clear()


def _segment(directory: Path, run_id: str) -> tuple[str, int]:
    key = str(directory)
    if key not in _held:
        name = segment_name(run_id)
        directory.mkdir(parents=True, exist_ok=True)
        _held[key] = (name, os.open(directory / name, os.O_WRONLY | os.O_CREAT, 0o644))
        fsync_dir(directory)
    return _held[key]


def _append(fd: int, source: Path) -> int:
    """Copy ``source`` to the end of the segment ``fd`` from a multiple of :data:`ALIGN`; its offset."""
    end = os.fstat(fd).st_size
    offset = -(-end // ALIGN) * ALIGN
    if offset > end:
        os.pwrite(fd, b"\0" * (offset - end), end)
    with open(source, "rb") as src:
        size = os.fstat(src.fileno()).st_size
        done = 0
        while done < size:
            try:
                n = os.copy_file_range(src.fileno(), fd, min(size - done, _COPY_CHUNK), done, offset + done)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                n = os.pwrite(fd, os.pread(src.fileno(), min(size - done, _COPY_CHUNK), done), offset + done)
            if n <= 0:
                raise OSError(f"{source}: the copy into its segment stopped at byte {done} of {size}")
            done += n
    return offset


def write_indexes(out: Path, records: Iterable[dict]) -> list[Path]:
    """Write ``<dir>/segments.jsonl`` for each directory the records name (lines sorted by name); the paths."""
    by_dir: dict[str, list[dict]] = {}
    for r in records:
        by_dir.setdefault(r["dir"], []).append(r)
    written = []
    for root, rows in sorted(by_dir.items()):
        rows.sort(key=lambda r: r["name"])
        path = out / root / INDEX
        atomic_write_lines(path, (json.dumps({k: r[k] for k in ("name", "segment", "offset", "length")},
                                             sort_keys=True).encode() for r in rows))
        written.append(path)
    return written


# ---- reading ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slice:
    """Where a file's bytes lie: ``path`` from ``offset``, ``length`` bytes (the whole file when not in a segment)."""

    path: Path
    offset: int
    length: int


_indexes: dict[str, tuple[tuple[int, int], dict[str, tuple[str, int, int]]]] = {}  # dir -> (stat, name -> entry)
_MAX_UP = 8  # directories above a file searched for an index


def locate(path: Path) -> Slice | None:
    """Where the file ``path`` lies: the file itself, or its slice of a segment (the nearest ``segments.jsonl``
    above it names it); None when neither."""
    path = Path(path)
    try:
        return Slice(path, 0, path.stat().st_size)
    except (FileNotFoundError, NotADirectoryError):
        pass
    for depth, directory in enumerate(path.parents):
        if depth >= _MAX_UP:
            break
        entries = _index(directory)
        if entries is None:
            continue
        found = entries.get(path.relative_to(directory).as_posix())
        return None if found is None else Slice(directory / found[0], found[1], found[2])
    return None


def exists(path: Path) -> bool:
    return locate(path) is not None


def listing(directory: Path) -> list[str]:
    """The files of ``directory`` (and below it), relative to it, sorted: the plain files, and the files its
    segments hold (from its index), not the segments and the index themselves."""
    directory = Path(directory)
    plain = [p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()
             and not (p.parent == directory and (p.name == INDEX or (p.name.startswith(PREFIX) and p.name.endswith(SUFFIX))))]
    return sorted({*plain, *(_index(directory) or {})})


def _index(directory: Path) -> dict[str, tuple[str, int, int]] | None:
    index = directory / INDEX
    try:
        st = index.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    key, stamp = str(directory), (st.st_ino, st.st_mtime_ns)
    cached = _indexes.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    entries: dict[str, tuple[str, int, int]] = {}
    with open(index, "rb") as fh:
        for line in fh:
            row = json.loads(line)
            entries[row["name"]] = (row["segment"], int(row["offset"]), int(row["length"]))
    _indexes[key] = (stamp, entries)
    return entries


def _found(path: Path) -> Slice:
    where = locate(path)
    if where is None:
        raise FileNotFoundError(errno.ENOENT, "no such file, and no segment index above it names it", str(path))
    return where


def open_slice(path: Path) -> io.BufferedReader | _SliceReader:
    """``path`` opened for reading as a binary file whose positions start at its first byte."""
    where = _found(path)
    if where.path == Path(path):
        return open(where.path, "rb")
    return _SliceReader(where)


class _SliceReader(io.RawIOBase):
    """A read-only file of one slice of a segment (seek and read within it)."""

    def __init__(self, where: Slice, shared: Any = None):
        super().__init__()
        self._owned = shared is None  # else a file of :class:`Readers`, closed by it
        self._fh = open(where.path, "rb") if shared is None else shared
        self._start, self._length, self._pos = where.offset, where.length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._length}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b: Any) -> int:
        n = max(0, min(len(b), self._length - self._pos))
        data = os.pread(self._fh.fileno(), n, self._start + self._pos) if n else b""
        b[:len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed and self._owned:
            self._fh.close()
        super().close()


class Readers:
    """Opens files that may lie in the same segments, each segment (or plain file) once: a reader of one
    partition of every unit of a shuffle opens the stage's few segments, not a file per unit. Its slices are
    read with positioned reads, so they share the open file. Use as a context manager (it closes them)."""

    def __init__(self) -> None:
        self._files: dict[Path, Any] = {}

    def open(self, path: Path) -> _SliceReader:
        where = _found(path)
        fh = self._files.get(where.path)
        if fh is None:
            fh = self._files[where.path] = open(where.path, "rb")
        return _SliceReader(where, fh)

    def __len__(self) -> int:
        """How many files are open."""
        return len(self._files)

    def __enter__(self) -> Readers:
        return self

    def __exit__(self, *_: Any) -> None:
        for fh in self._files.values():
            fh.close()
        self._files.clear()


def memmap(path: Path, dtype: Any, offset: int, shape: tuple[int, ...]):
    """``np.memmap`` of ``shape`` items of ``dtype`` from byte ``offset`` of the file ``path`` (wherever it lies)."""
    import numpy as np

    where = _found(path)
    return np.memmap(where.path, dtype=dtype, mode="r", offset=where.offset + offset, shape=shape)


def load_npy(path: Path):
    """An ``.npy`` array, memory-mapped (read only), wherever the file lies."""
    import numpy as np

    where = _found(path)
    if where.path == Path(path):
        return np.load(where.path, mmap_mode="r")
    with _SliceReader(where) as fh:
        version = np.lib.format.read_magic(fh)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = header(fh)
        start = fh.tell()
    return np.memmap(where.path, dtype=dtype, mode="r", offset=where.offset + start, shape=shape,
                     order="F" if fortran else "C")


def arrow_source(path: Path):
    """What ``pyarrow.parquet`` reads ``path`` from: the path itself, or a memory-mapped slice of its segment."""
    where = _found(path)
    if where.path == Path(path):
        return str(where.path)
    import pyarrow as pa

    with pa.memory_map(str(where.path)) as mm:
        buffer = mm.read_at(where.length, where.offset)  # zero-copy: the buffer keeps the mapping alive
    return pa.BufferReader(buffer)


def size(path: Path) -> int:
    return _found(path).length


def scratch_dir(stage_root: Path) -> Path | None:
    """This stage's staging root under :func:`scratch_root`, named after the stage's state directory."""
    root = scratch_root()
    if root is None:
        return None
    tag = hashlib.sha256(str(stage_root.resolve()).encode()).hexdigest()[:16]
    return root / f"tokenmill-staging-{tag}"

