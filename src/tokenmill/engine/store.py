"""Outputs on object storage (``--out s3://bucket/prefix``, any fsspec URL): stage locally, publish committed files.

A run into a URL works in a local **work directory** exactly as a run into a local ``--out`` does (lock,
per-run staging, rename, markers), and the bucket receives what is committed, in an order that makes a
marker mean "complete":

1. **Start.** The work directory (``--work-dir``, default ``$TOKENMILL_CACHE/out/<hash of the URL>``) is
   locked (``flock``) and emptied; the bucket's ``_state/`` (stage fingerprints, input snapshot, unit
   markers, per-unit rejects) is downloaded into it. The bucket is the truth: a resume on another machine,
   or with a new work directory, resumes from the bucket's markers.
2. **Each unit** (in whichever worker commits it, on any node): its files are renamed out of staging as
   locally, then each is uploaded to its **final key**, then the unit's marker key
   ``_state/<stage>/done/<unit>.json`` is written, last; the local copies of the unit's files outside
   ``_state/`` are then deleted (the work directory holds state and staging, not the outputs). Object
   storage has no rename, and needs none here: one PUT is atomic (a reader sees no object or the whole
   object, never part of one), so a unit's keys are written once, under their final names, and no
   temporary key is ever left behind; a unit whose marker is missing is redone and overwrites its keys
   with the same bytes (output names derive from the unit). Once the stage has ended, the driver puts
   its index key ``_state/<stage>/index.jsonl`` and only then deletes the unit marker keys.
3. **Finalize** runs in the driver after downloading the ``_state/`` files it lacks (the rejects of units
   other nodes or earlier runs committed; a track that reads more, such as SFT's packing report, names
   it); then its outputs are uploaded with ``manifest.json`` last, so a manifest in the bucket means the
   run is complete.

**Locking, and its limit.** Object storage has no exclusive lock. A run writes ``_state/lock.json`` (host,
pid, start time) after checking that no other run holds it, reads it back, and deletes it when it ends.
This is best effort: two runs started within the same moment can both pass the check, and a run killed
with ``kill -9`` leaves the object behind. A lock left by a dead process on this host is taken over;
one left by another host is refused, naming it (delete the key when that run is known to be dead).

Credentials and the endpoint come from the filesystem's usual sources (for s3fs: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, ``~/.aws``) or from ``storage_options``
(``--storage-option endpoint_url=http://host:9000``), passed to ``fsspec.url_to_fs``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenmill.engine.outdir import JOB_FILE, OWN_DIRS, OWN_FILES, OWN_PATTERN, RUN_FILE
from tokenmill.errors import ConfigError, MissingExtraError, StorageError

STATE = "_state"
LOCK_KEY = f"{STATE}/lock.json"
MANIFEST = "manifest.json"
PUBLISHED = f"{STATE}/published.json"  # the files a run published at its end: what --overwrite deletes
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_FILESYSTEMS: dict[tuple[str, str], Any] = {}  # one filesystem object per (url, options) in each process


def is_remote(out: Any) -> bool:
    """Whether ``out`` names object storage (``s3://...``, any fsspec URL but ``file://``)."""
    if isinstance(out, RemoteOutput):
        return True
    return isinstance(out, str) and bool(_URL.match(out)) and not out.startswith(("file://", "local://"))


class Url(str):
    """An object-storage URL that joins names as a path does (``Path("s3://b/p")`` folds the ``//``), for the
    lines a command prints about where its outputs are."""

    def __truediv__(self, name: str) -> Url:
        return Url(f"{self.rstrip('/')}/{name}")


def shown(out: Any) -> Path | Url:
    """``--out`` as a command names it in its summary: the directory, or the URL of an object-storage output."""
    return Url(getattr(out, "url", out)) if is_remote(out) else Path(out)


@dataclass(frozen=True)
class RemoteOutput:
    """``out=`` for object storage with options: the URL, fsspec ``storage_options``, the local work dir."""

    url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    work_dir: str | os.PathLike | None = None


@dataclass(frozen=True)
class Store:
    """A prefix on an fsspec filesystem that committed files are published to (picklable: workers get it)."""

    url: str
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def fs(self) -> Any:
        key = (self.url, json.dumps(self.options, sort_keys=True, default=str))  # option values may be dicts
        if key not in _FILESYSTEMS:
            _FILESYSTEMS[key] = _open_fs(self.url, dict(self.options))[0]
        return _FILESYSTEMS[key]

    @property
    def root(self) -> str:
        return self.fs._strip_protocol(self.url).rstrip("/")

    def key(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def where(self, rel: str = "") -> str:
        """The URL of ``rel`` (for messages and summaries)."""
        return f"{self.url.rstrip('/')}/{rel}" if rel else self.url

    def put(self, local: Path, rel: str) -> None:
        with _storage(self, f"upload {rel}"):
            self.fs.put_file(str(local), self.key(rel))

    def put_many(self, work: Path, rels: list[str]) -> None:
        """Upload ``work/rel`` to ``rel`` for every ``rel``, concurrently where the filesystem can."""
        if rels:
            with _storage(self, f"upload {rels[0]}{f' and {len(rels) - 1} more' if len(rels) > 1 else ''}"):
                self.fs.put([str(work / r) for r in rels], [self.key(r) for r in rels])

    def write(self, rel: str, data: bytes) -> None:
        with _storage(self, f"write {rel}"):
            self.fs.pipe_file(self.key(rel), data)

    def read(self, rel: str) -> bytes | None:
        """The object's bytes, or None when there is none."""
        with _storage(self, f"read {rel}"):
            try:
                return self.fs.cat_file(self.key(rel))
            except FileNotFoundError:
                return None

    def get_many(self, rels: list[str], work: Path) -> None:
        """Download every ``rel`` to ``work/rel``, concurrently where the filesystem can."""
        for rel in rels:
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
        if rels:
            with _storage(self, f"download {rels[0]}{f' and {len(rels) - 1} more' if len(rels) > 1 else ''}"):
                self.fs.get([self.key(r) for r in rels], [str(work / r) for r in rels])

    def files(self, under: str = "") -> list[str]:
        """Every object below ``under``, relative to the prefix, sorted (never a cached listing)."""
        base = self.key(under).rstrip("/")
        with _storage(self, f"list {under or '/'}"):
            self.fs.invalidate_cache()
            try:
                found = self.fs.find(base)
            except FileNotFoundError:
                return []
        return sorted(p[len(self.root) + 1:] for p in found if p.startswith(self.root + "/"))

    def delete(self, rels: Iterable[str]) -> None:
        keys = [self.key(r) for r in rels]
        if keys:
            with _storage(self, f"delete {len(keys)} object(s)"):
                self.fs.rm(keys)


def open_store(out: str | RemoteOutput, *, storage_options: Mapping[str, Any] | None = None,
               role: str = "--out") -> Store:
    """The :class:`Store` for a URL (or a :class:`RemoteOutput`), its bucket checked for existence; ``role``
    names the URL in messages (``--out``, or ``input`` for a finished run read back)."""
    url, options = (out.url, dict(out.storage_options)) if isinstance(out, RemoteOutput) else (out, {})
    options.update(storage_options or {})
    store = Store(url.rstrip("/"), tuple(sorted(options.items())))
    bucket = store.root.split("/", 1)[0]
    with _storage(store, f"reach the bucket {bucket!r}"):
        if not store.fs.exists(bucket):
            first = "check the URL of the input" if role != "--out" else "create it first"
            raise StorageError(f"{role} {url}: the bucket {bucket!r} does not exist (or is not visible with these "
                               f"credentials); {first} or check the endpoint (AWS_ENDPOINT_URL, "
                               "--storage-option endpoint_url=...)")
    return store


def work_dir_for(out: str | RemoteOutput) -> Path:
    """The local work directory of a run into ``out``: given, or ``$TOKENMILL_CACHE/out/<hash of the URL>``."""
    if isinstance(out, RemoteOutput) and out.work_dir is not None:
        return Path(out.work_dir).expanduser().absolute()
    url = out.url if isinstance(out, RemoteOutput) else out
    cache = Path(os.environ.get("TOKENMILL_CACHE") or Path.home() / ".cache" / "tokenmill")
    return (cache / "out" / hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]).absolute()


def _open_fs(url: str, options: dict) -> Any:
    from fsspec.core import url_to_fs

    try:
        return url_to_fs(url, **options)
    except ImportError as exc:  # fsspec names the package the protocol needs (s3fs, gcsfs, adlfs)
        raise MissingExtraError(getattr(exc, "name", None) or "s3fs", "s3", f"write outputs to {url}") from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"--out {url}: {exc} (check the URL and the --storage-option values)") from None


@contextmanager
def _storage(store: Store, action: str) -> Iterator[None]:
    """Turn the filesystem's errors into one ``StorageError`` that says what failed and where."""
    try:
        yield
    except (StorageError, ConfigError, FileNotFoundError):
        raise
    except Exception as exc:  # botocore, aiohttp and OS errors alike: the run cannot go on
        raise StorageError(f"{store.url}: could not {action}: {type(exc).__name__}: {exc} (check the credentials, "
                           "the endpoint and the network)") from exc


# ---- one run's life with a store -----------------------------------------------------------------------

def publish_unit(store: Store, work: Path, files: list[str], marker: str, data: bytes) -> None:
    """Upload a committed unit: its files to their final keys, then its marker, last; free the local copies."""
    store.put_many(work, files)
    store.write(marker, data)
    for rel in files:
        if not rel.startswith(STATE + "/"):
            (work / rel).unlink(missing_ok=True)


def publish_state(store: Store, root: Path) -> None:
    """Upload a stage's bookkeeping files (its fingerprint, the input snapshot) once it is prepared."""
    for path in sorted(p for p in root.iterdir() if p.is_file() and p.suffix == ".json"):
        store.put(path, str(path.relative_to(root.parent.parent)))


def pull(store: Store, work: Path, prefixes: Iterable[str] = (STATE + "/",)) -> int:
    """Download the objects below ``prefixes`` that the work directory lacks (never the lock); return how many."""
    missing = sorted({rel for prefix in prefixes for rel in store.files(prefix)
                      if rel != LOCK_KEY and not (work / rel).exists()})
    store.get_many(missing, work)
    return len(missing)


def publish_outputs(store: Store, work: Path, committed: set[str]) -> None:
    """Upload what finalize wrote (files outside ``_state/`` not among the units' ``committed`` files),
    ``manifest.json`` last, then free the local copies."""
    files = sorted(str(p.relative_to(work)) for p in work.rglob("*")
                   if p.is_file() and p.relative_to(work).parts[0] != STATE)
    todo = [r for r in files if r not in committed and r != MANIFEST]
    store.put_many(work, todo)
    if MANIFEST in files:
        store.put(work / MANIFEST, MANIFEST)
    for rel in files:
        (work / rel).unlink()


def publish_run(store: Store, work: Path, files: Iterable[str]) -> None:
    """Upload a run made whole in the work directory (a job whose later stages read the earlier ones' files).

    First its workflow and stage fingerprints (what guards a later run into the prefix, and what tells
    ``--overwrite`` the prefix is tokenmill's) and the list of ``files`` (``_state/published.json``: what
    ``--overwrite`` deletes, and nothing else); then ``files`` (what the run wrote, outside ``_state/``);
    ``manifest.json`` last, so a prefix without it is a run not yet published. Every key is written whole
    under its final name: a publish killed midway and done again leaves the same objects. The work
    directory keeps its copies (its stages' files are what a resume reads)."""
    files = sorted(files)
    marks = [(work / STATE / JOB_FILE), *sorted((work / STATE).glob(f"*/{RUN_FILE}"))]
    store.put_many(work, [str(p.relative_to(work)) for p in marks if p.is_file()])  # first: --overwrite knows it
    store.write(PUBLISHED, json.dumps({"files": sorted(set(files) | set(published_files(store) or ()))}).encode())
    store.put_many(work, [r for r in files if r != MANIFEST])
    if MANIFEST in files:
        store.put(work / MANIFEST, MANIFEST)


def published_files(store: Store) -> list[str] | None:
    """The files the runs published at their end recorded in the prefix (``_state/published.json``), or None."""
    try:
        record = json.loads(store.read(PUBLISHED) or b"null")
    except ValueError:
        return None
    files = record.get("files") if isinstance(record, dict) else None
    return [f for f in files if isinstance(f, str)] if isinstance(files, list) else None


def publish_card(store: Store, local: Path, names: tuple[str, ...], write: Any) -> None:
    """Add the files ``names`` to a finished run on ``store`` (``tokenmill card``): ``write()`` makes them in
    ``local`` (the run's local copy), then they are uploaded and recorded as published. Refused, before
    anything is written, for a prefix tokenmill did not write, and over an object of those names that no run
    published (a user's own: a run published at its end names its files; one published unit by unit
    writes its card under tokenmill's reserved names)."""
    recorded = published_files(store)
    if not any(re.fullmatch(rf"{STATE}/([^/]+/run|job)\.json", r) for r in store.files(STATE + "/")):
        raise ConfigError(f"{store.url} is not a tokenmill output (no {STATE}/job.json); `tokenmill card` writes "
                          "only into a run tokenmill wrote")
    if recorded is not None:
        theirs = [n for n in names if store.read(n) is not None and n not in recorded]
        if theirs:
            raise ConfigError(f"{store.where(theirs[0])} was not written by tokenmill; `tokenmill card` would replace "
                              "it: move it away first")
        store.write(PUBLISHED, json.dumps({"files": sorted(set(recorded) | set(names))}).encode())
    write()
    store.put_many(local, list(names))


def published_workflow(store: Store) -> str | None:
    """The workflow whose run a prefix holds (its ``_state/job.json``), or None."""
    try:
        value = json.loads(store.read(f"{STATE}/{JOB_FILE}") or b"null")
    except ValueError:
        return None
    return value.get("workflow") if isinstance(value, dict) and isinstance(value.get("workflow"), str) else None


def pull_fingerprints(store: Store, work: Path) -> None:
    """Download the prefix's stage fingerprints the work directory lacks (never their markers or indexes): a
    run into a prefix that holds another run's outputs, started with a new work directory, is refused when
    its settings differ, and redoes its stages (the same bytes) when they agree."""
    missing = [rel for rel in store.files(STATE + "/") if re.fullmatch(rf"{STATE}/[^/]+/{RUN_FILE}", rel)
               and not (work / rel).exists()]
    store.get_many(missing, work)


def clear_store(store: Store) -> None:
    """``--overwrite`` on a bucket: delete what a tokenmill run wrote there (the files its record names, for a
    run published at its end; else tokenmill's own names), refusing a foreign prefix."""
    objects = [r for r in store.files() if r != LOCK_KEY]
    if objects and not any(re.fullmatch(rf"{STATE}/([^/]+/run|job)\.json", r) for r in objects):
        raise ConfigError(f"--overwrite refuses to clear {store.url}: it holds objects ({', '.join(objects[:5])}) and "
                          f"is not a tokenmill output (no {STATE}/job.json); choose an empty or new prefix")
    top = lambda r: r.split("/", 1)[0]  # noqa: E731
    recorded = published_files(store)
    if recorded is not None:  # a run published at its end: exactly what it recorded, a user's objects stay
        ours = [r for r in objects if top(r) == STATE or r in set(recorded)]
    else:
        ours = [r for r in objects if top(r) == STATE or ("/" not in r and (r in OWN_FILES or OWN_PATTERN.match(r)))
                or ("/" in r and top(r) in OWN_DIRS)]
    store.delete(ours)


@contextmanager
def hold_store(store: Store) -> Iterator[None]:
    """Hold the best-effort lock object ``_state/lock.json`` of ``store`` (module docstring: its limits)."""
    held = store.read(LOCK_KEY)
    if held is not None and not _stale(held):
        info = _lock_info(held)
        raise ConfigError(f"--out {store.url} is in use by another tokenmill run (pid {info.get('pid')} on "
                          f"{info.get('host')}, since {info.get('started')}); wait for it to finish, or, if that run "
                          f"is dead, delete {store.where(LOCK_KEY)} and start again")
    mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                       "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "nonce": os.urandom(8).hex()}).encode()
    store.write(LOCK_KEY, mine)
    if store.read(LOCK_KEY) != mine:
        raise ConfigError(f"--out {store.url}: another tokenmill run took the lock at the same moment; start again")
    try:
        yield
    finally:
        if store.read(LOCK_KEY) == mine:
            store.delete([LOCK_KEY])


def _lock_info(data: bytes) -> dict:
    try:
        info = json.loads(data)
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def _stale(data: bytes) -> bool:
    """A lock left by a process of this host that no longer runs (a run killed with ``kill -9``)."""
    info = _lock_info(data)
    if info.get("host") != socket.gethostname() or not isinstance(info.get("pid"), int):
        return False
    try:
        os.kill(info["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# ---- reading a finished output back ---------------------------------------------------------------------

def local_copy(url: str, *, storage_options: Mapping[str, Any] | None = None, cache: Path | None = None) -> Path:
    """A local copy of the finished run at ``url`` (everything but ``_state/``), for readers that map files.

    Kept under ``$TOKENMILL_CACHE/in/<hash of the URL>`` (or ``cache``) and brought up to date on every
    call: objects missing locally or of another size are downloaded, local files the bucket no longer
    holds are removed. The shards' checksums (``audit``, ``verify=True``) catch anything else.
    """
    store = open_store(url, storage_options=storage_options, role="input")
    if store.read(MANIFEST) is None:
        raise StorageError(f"{store.where(MANIFEST)} does not exist: {url} holds no finished tokenmill run (a run "
                           "writes its manifest last; resume it with the same command)")
    target = cache or work_dir_for(store.url).parent.parent / "in" / work_dir_for(store.url).name
    sizes = _sizes(store)
    for path in [p for p in target.rglob("*") if p.is_file()] if target.is_dir() else []:
        if str(path.relative_to(target)) not in sizes:
            path.unlink()
    stale = [rel for rel, size in sizes.items() if not (target / rel).is_file() or (target / rel).stat().st_size != size]
    store.get_many(sorted(stale), target)
    target.mkdir(parents=True, exist_ok=True)
    return target


def readable(directory: str | os.PathLike, *, storage_options: Mapping[str, Any] | None = None) -> Path:
    """``directory`` as a local path: itself, or the :func:`local_copy` of an ``s3://`` (any fsspec URL) run."""
    if is_remote(directory):
        return local_copy(str(directory), storage_options=storage_options)
    return Path(directory)


def _sizes(store: Store) -> dict[str, int]:
    """Size of every object outside ``_state/``, by key relative to the prefix."""
    with _storage(store, "list the run's objects"):
        store.fs.invalidate_cache()
        found = store.fs.find(store.root, detail=True)
    return {key[len(store.root) + 1:]: int(info.get("size") or 0) for key, info in found.items()
            if key.startswith(store.root + "/") and not key[len(store.root) + 1:].startswith(STATE + "/")}
