"""Around every workflow's stages: the output guard and lock, ``--overwrite``, object storage, the
fingerprint, progress, and the executor.

``hold_job(out, workflow=..., inputs=..., overwrite=...)`` is the only way a command takes its ``--out``:

1. ``--out`` is checked against the inputs (never an input, never holding one, never inside an input
   directory) before anything is written (:func:`tokenmill.engine.outdir.check_output_path`);
2. a non-empty directory that tokenmill did not write is refused, with or without ``--overwrite``, and so
   is another workflow's output unless ``--overwrite`` (``_state/job.json`` names the workflow);
3. the directory is locked (``flock``) until the block ends; ``--overwrite`` then removes only the files
   tokenmill writes;
4. with an ``s3://`` output the local work directory is locked and emptied, the bucket's lock object
   taken, the bucket cleared on ``--overwrite``, and its ``_state/`` downloaded (``engine/store.py``).

The commands that write a single file or a folder of their own (``export``, ``plan``, ``demo``, ``card``)
take the same guard: :func:`hold_own_folder` for a folder written in one go (``plan``, ``demo``: local or
``s3://``, published when written), :func:`local_out` where a command writes locally only (an ``s3://`` ``--out``
refused before anything is written, never a local folder named ``s3:``; ``export`` uploads instead,
``shards/export_remote.py``), :func:`hold_file` for a file (the same
refusals and one run at a time), and :func:`tokenmill.engine.outdir.hold_finished` for files added to a
finished output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill.engine import LocalExecutor, Unit, UnitResult
from tokenmill.engine.outdir import STATE, check_output_path, check_target, hold_output, hold_path, written_by, written_now
from tokenmill.engine.progress import Progress
from tokenmill.engine.store import (
    clear_store,
    hold_store,
    is_remote,
    open_store,
    publish_run,
    published_workflow,
    pull_fingerprints,
    work_dir_for,
)
from tokenmill.engine.store import pull as download
from tokenmill.errors import ConfigError

if TYPE_CHECKING:
    from tokenmill.base.inputs import InputFile
    from tokenmill.engine.store import Store
    from tokenmill.engine.workflow import Executor
    from tokenmill.tokenize.tokenizer import Tokenizer


def resolve_out(out: Any, inputs: Sequence[str]) -> tuple[Path, Store | None]:
    """The local directory a run writes in, and the object store it publishes to (None for a local ``--out``).

    A local ``out`` is checked against the inputs (``engine/outdir.py``); a URL (``s3://bucket/prefix``, or a
    :class:`~tokenmill.engine.store.RemoteOutput`) gets its work directory (``engine/store.py``).
    """

    inputs = [str(i) for i in inputs]
    if not is_remote(out):
        check_output_path(out, inputs)
        return Path(out), None
    store = open_store(out)
    for given in inputs:
        if given.rstrip("/") == store.url or given.startswith(store.url + "/") or store.url.startswith(given.rstrip("/") + "/"):
            raise ConfigError(f"--out {store.url} holds or lies inside the input {given}; write the output to a prefix "
                              "of its own")
    work = work_dir_for(out)
    check_output_path(work, inputs)
    return work, store


def check_job(out: Path, *, workflow: str, overwrite: bool) -> None:
    """The refusals of :func:`hold_job`, made without writing anything (before a slow start, e.g. a server check)."""
    check_target(Path(out), overwrite=overwrite, workflow=workflow)


def check_file_target(path: str | Path, *, overwrite: bool, ours: Callable[[Path], bool], what: str) -> Path:
    """A command that writes one file (a model): never over a directory, never over a file tokenmill did not
    write (``ours(path)`` says whether it did), and over its own earlier file only with ``overwrite``."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"--out {path} is a directory; give the path of the {what} file to write, e.g. {path / 'model.bin'}")
    if path.exists() and not ours(path):
        raise ConfigError(f"--out {path} exists and was not written by tokenmill; choose another path for the {what}")
    if path.exists() and not overwrite:
        raise ConfigError(f"--out {path} holds an earlier {what}; pass --overwrite to replace it, or choose another path")
    return path


def local_out(out: Any, command: str) -> Path:
    """``out`` as a local path, for a command that writes only locally; an object-storage URL is refused
    before anything is written (``Path("s3://b/p")`` would be a local folder named ``s3:``)."""

    if is_remote(out):
        raise ConfigError(f"--out {out}: `tokenmill {command}` writes to a local path only, not to object storage; "
                          f"write it to a local --out, then copy it (e.g. `aws s3 cp --recursive DIR {out}`)")
    return Path(out)


@contextlib.contextmanager
def hold_file(path: str | Path, *, overwrite: bool, ours: Callable[[Path], bool], what: str,
              command: str) -> Iterator[Path]:
    """Guard and lock the file ``path`` (and its siblings ``path.*``) for one run of a command that writes a
    file: local only (:func:`local_out`), the refusals of :func:`check_file_target`, made once the lock is
    held, and one run at a time (a second is refused at once, naming the first)."""
    path = local_out(path, command)
    check_file_target(path, overwrite=overwrite, ours=ours, what=what)  # before anything is written
    path.parent.mkdir(parents=True, exist_ok=True)
    with hold_path(path):
        check_file_target(path, overwrite=overwrite, ours=ours, what=what)  # what a run just finished left
        yield path


@contextlib.contextmanager
def hold_job(out: Path, *, workflow: str, overwrite: bool, store: Store | None = None,
             at_end: bool = False) -> Iterator[Path]:
    """Guard and lock ``out`` for one run of ``workflow`` (module docstring); yields the local directory.

    ``at_end``: the run is published to ``store`` when it ends (``publish_run``), so its work directory is
    kept from run to run like a local ``--out`` (a resume reads the earlier stages' files there); the
    prefix's workflow and stage fingerprints guard it as a local directory's record does."""
    if store is None:
        with hold_output(out, overwrite=overwrite, workflow=workflow):
            yield out
        return
    if at_end:
        with hold_output(out, overwrite=overwrite, workflow=workflow), hold_store(store):
            _take_prefix(store, out, workflow=workflow, overwrite=overwrite)
            yield out
        return

    with hold_output(out, overwrite=True, workflow=workflow), hold_store(store):
        if overwrite:
            clear_store(store)
        download(store, out)
        yield out


def check_own_folder(out: Any, *, workflow: str) -> tuple[Path, Store | None, bool]:
    """For a command that writes a folder of its own in one go (``plan``): ``out`` resolved (a directory, or an
    ``s3://`` prefix and its work directory), the refusals of :func:`hold_job` made without writing anything,
    and whether it holds this command's earlier output (a rerun replaces exactly what that one recorded)."""
    local, store = resolve_out(out, [])
    again = written_by(local) == workflow if local.is_dir() else False
    if store is not None:
        again = again or published_workflow(store) == workflow
        other = published_workflow(store)
        if other is not None and other != workflow:
            raise ConfigError(f"--out {store.url} holds the output of `tokenmill {other}`; `tokenmill {workflow}` "
                              "writes to a prefix of its own: choose another --out")
    check_target(local, overwrite=again, workflow=workflow)
    return local, store, again


@contextlib.contextmanager
def hold_own_folder(out: Any, *, workflow: str) -> Iterator[Path]:
    """Guard and lock ``out`` (:func:`check_own_folder`) while the block writes its files in the local
    directory; with a URL, what it wrote is published to the prefix when the block ends (``publish_run``)."""
    local, store, again = check_own_folder(out, workflow=workflow)
    with hold_job(local, workflow=workflow, overwrite=again, store=store, at_end=True):
        yield local
        if store is not None:
            publish_run(store, local, _folder_files(local))


def _folder_files(local: Path) -> set[str]:
    """What a folder command wrote: its own files and those of the runs it made in folders of their own
    (``demo``'s two tracks, each a tokenmill output with its ``_state/``)."""
    files = written_now(local)
    for inner in (d for d in local.iterdir() if d.is_dir() and d.name != STATE and (d / STATE).is_dir()):
        files |= {f"{inner.name}/{rel}" for rel in written_now(inner)}
    return files


def _take_prefix(store: Store, work: Path, *, workflow: str, overwrite: bool) -> None:
    """A prefix holding another workflow's run is refused unless ``overwrite``, which clears it; otherwise
    its stage fingerprints come into the work directory, so that a run of other settings is refused."""
    other = published_workflow(store)
    if other is not None and other != workflow and not overwrite:
        raise ConfigError(f"--out {store.url} holds the output of `tokenmill {other}`; `tokenmill {workflow}` writes "
                          "to a prefix of its own: choose another --out (or pass --overwrite to replace it)")
    if overwrite:
        clear_store(store)
    pull_fingerprints(store, work)


def job_fingerprint(workflow: str, files: Sequence[InputFile], config: dict, *, tokenizer: Tokenizer | None = None) -> str:
    """What a resume must match: the workflow, every input's path, size and format, the tokenizer, the options."""
    h = hashlib.sha256(workflow.encode())
    for f in files:
        h.update(f"{f.path}\0{f.size}\0{f.format}\0".encode("utf-8", "surrogateescape"))  # any file name
    if tokenizer is not None:
        h.update(tokenizer.fingerprint.encode())
    h.update(json.dumps(config, sort_keys=True, default=str).encode())
    return h.hexdigest()


def holding(executor: Executor | None) -> Any:
    """``with holding(executor):`` keeps one set of workers for the whole run (when the executor can)."""
    return executor if hasattr(executor, "__enter__") else contextlib.nullcontext(executor)


def pick_executor(executor: Executor | None, workers: int | None) -> Executor:
    """The caller's executor, else a local pool of ``workers`` processes; never both."""
    if executor is None:
        return LocalExecutor(workers=workers)
    if workers is not None:
        raise ConfigError("give either workers= or executor= (set the number of workers on the executor)")
    return executor


def stage_progress(enabled: bool | None,
                   seconds: dict[str, float] | None = None) -> Callable[[str, list[Unit], dict[int, UnitResult]], Any]:
    """A progress bar per stage: its units, their sizes, and the units a resume found done; with ``seconds``,
    each stage's wall time (from its plan to its last unit) is recorded there under the stage's key."""
    def start(key: str, units: list[Unit], done: dict[int, UnitResult]) -> Any:
        bar = Progress(total_units=len(units), total_bytes=sum(u.size for u in units), enabled=enabled)
        bar.skip(len(done), list(done.values()))
        return bar if seconds is None else _Timed(bar, key, seconds)

    return start


class _Timed:
    """A stage's progress bar that also records the stage's wall seconds when it closes."""

    def __init__(self, bar: Progress, key: str, seconds: dict[str, float]):
        self.bar, self.key, self.seconds, self.started = bar, key, seconds, time.monotonic()

    def update(self, result: UnitResult) -> None:
        self.bar.update(result)

    def close(self) -> None:
        self.bar.close()
        self.seconds[self.key] = round(time.monotonic() - self.started, 3)
