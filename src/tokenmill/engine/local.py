"""The embedded executor: the units of a stage in this process (1 worker) or a local process pool.

Every executor commits a unit the same way (:func:`commit_unit`):

* **Atomic commit.** The task writes into ``<out>/_state/<stage>/tmp/<unit>/``; when it returns, every file
  is renamed into place (``os.replace``) and only then is the unit recorded as committed: one line appended
  to this process's journal under ``<out>/_state/<stage>/done/``, fsynced (``engine/journal.py``: one file per
  worker process and stage, not one per unit). A unit not in a journal is redone from scratch and
  overwrites whatever a killed attempt left, so a run killed with ``kill -9`` and started again ends with
  the same bytes. With an object store (``s3://`` outputs), the files are first uploaded to their final
  keys and the unit's marker key written last (``engine/store.py``). Once the stage has ended, the driver
  folds its journals into one index file (``engine/workflow.py``).
* **Determinism.** Output names derive from the unit, never from the worker or the finishing order, and
  results are keyed by unit index: 1 worker or N give identical bytes.

Start-up. A pool costs a process start per worker, the imports of the track's modules and the unpickling
of the task (a tokenizer rebuilds its encoders). The pool can be started before the task exists
(:meth:`LocalExecutor.prepare`, called by the tracks before they route inputs and load the tokenizer),
from a thread, so that it starts while the driver works. The fork server imports the ``preload`` modules
once, as it starts, and every worker it forks has them (:func:`preload_in_forkserver`); a preload module
may build more there (the tracks' fast encoder, curation's language identifier: tokenmill/engine/warm.py). The task
travels once per worker through a file in the stage's state directory, not once per unit. One unit, or
one worker, never starts a pool: it runs in this process.
"""

from __future__ import annotations

import errno
import importlib
import itertools
import json
import multiprocessing
import os
import pickle
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill._guard import allowed_workers
from tokenmill.base import segments
from tokenmill.base.files import atomic_write
from tokenmill.base.memory import process_peak_rss_mb
from tokenmill.engine import journal
from tokenmill.engine.outputs import output
from tokenmill.engine.stage import Task, Unit, UnitResult
from tokenmill.engine.store import publish_unit
from tokenmill.engine.warm import preload_in_forkserver  # guards the fork server
from tokenmill.engine.workers import (
    default_workers,
    die_with_parent,
    watch_main_process,
    worker_died,
    worker_environment,
)

if TYPE_CHECKING:
    from tokenmill.engine.workflow import StageState

__all__ = ["LocalExecutor", "atomic_write", "commit_unit", "default_workers", "process_peak_rss_mb"]

# units submitted per worker ahead of the results: enough to keep every worker fed, few enough that each
# wait() (which walks every pending future) stays cheap -- submitting 100,000 units at once made the driver
# quadratic (BENCHMARKS.md, "The driver at 100,000 units")
IN_FLIGHT = 8


class Held:
    """Nested ``with`` blocks around an executor: its workers (a pool, actors) stay up across the runs inside,
    and ``close()`` runs when the outermost block ends."""

    _held = 0  # depth of the ``with`` blocks now open

    def __enter__(self):
        self._held += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        self._held -= 1
        if not self._held:
            self.close()

    def close(self) -> None:
        """Let the workers go (each executor its own kind)."""
        raise NotImplementedError


class LocalExecutor(Held):
    """Runs a stage's units here (one worker) or in a pool of ``workers`` processes (default: all cores).

    The task's ``setup()`` (when it has one) runs once per worker, before its first unit. Used as a
    context manager, one pool serves every stage of a workflow (and every run inside the block) and is
    shut down when the outermost block ends; otherwise each :meth:`run` starts and stops its own.
    """

    name = "local"

    def __init__(self, *, workers: int | None = None):
        self.workers = allowed_workers(workers or default_workers())  # 1 for a script without a __main__ guard
        self._pool: ProcessPoolExecutor | None = None
        self._tasks = itertools.count()

    def prepare(self, n_units: int, *, preload: Sequence[str] = ()) -> None:
        """A hint that about ``n_units`` units follow: start the pool now when it will be needed.

        Each worker imports the ``preload`` modules (the track's task module) as it starts, so that work
        overlaps whatever the driver does before the first :meth:`run`.
        """
        if min(self.workers, n_units) > 1 and self._pool is None:
            self._start(min(self.workers, n_units), preload, wait=False)

    def run(self, task: Task, units: list[Unit], state: StageState, progress: Any = None) -> dict[int, UnitResult]:
        n = min(self.workers, len(units))
        if n <= 1 and self._pool is None:
            return self._run_here(task, units, state, progress)
        pool = self._pool if self._pool is not None else self._start(n, ())
        try:
            return self._run_pool(pool, task, units, state, progress)
        finally:
            if not self._held:
                self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _run_here(self, task: Task, units: list[Unit], state: StageState, progress: Any) -> dict[int, UnitResult]:
        results: dict[int, UnitResult] = {}
        if units:
            _setup(task)
        for unit in units:
            results[unit.index] = commit_unit(task, unit, state)
            if progress is not None:
                progress.update(results[unit.index])
        return results

    def _start(self, n: int, preload: Sequence[str], *, wait: bool = True) -> ProcessPoolExecutor:
        """Start the pool's processes; ``wait=False``: from a thread, so the caller goes on at once.

        Starting a worker waits until the fork server has forked it, and a fork server that starts now first
        imports its preload modules (seconds on a loaded machine): the driver routes meanwhile. The server
        itself starts here, in this thread, with this process's environment (tokenmill/engine/warm.py).
        """
        # forkserver: workers start from a clean process, never from a parent whose tokenizer thread pools
        # are already running (a fork of those can deadlock).
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        if method == "forkserver":
            from multiprocessing import forkserver

            preload_in_forkserver(preload)
            forkserver.ensure_running()  # returns once the server is spawned, not when its imports are done
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context(method),
                                         initializer=_start_worker,
                                         initargs=(tuple(preload), os.getpid(), worker_environment()))
        pool = self._pool

        def spawn() -> None:
            for _ in range(n):  # processes start on submit (more on demand): start these now, not at the first unit
                try:
                    pool.submit(os.getpid)
                except RuntimeError:  # the pool was shut down meanwhile (the run failed before its first unit)
                    return

        if wait:
            spawn()
        else:
            threading.Thread(target=spawn, name="tokenmill-pool-start", daemon=True).start()
        return pool

    def _run_pool(self, pool: ProcessPoolExecutor, task: Task, units: list[Unit], state: StageState, progress: Any
                  ) -> dict[int, UnitResult]:
        path = state.root / "task.pkl"  # in the stage's state: a killed run leaves nothing elsewhere
        atomic_write(path, pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))
        handle = (f"{os.getpid()}-{id(self)}-{next(self._tasks)}", str(path))
        results: dict[int, UnitResult] = {}
        queue = iter(largest_first(units))
        pending: dict[Any, Unit] = {}

        def submit(n: int) -> None:
            for u in itertools.islice(queue, n):
                pending[pool.submit(_commit_installed, handle, u, state)] = u

        try:
            submit(IN_FLIGHT * self.workers)
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    unit = pending.pop(fut)
                    try:
                        results[unit.index] = fut.result()
                    except BrokenProcessPool as exc:  # a worker was killed (out of memory, most often)
                        self._pool = None
                        raise worker_died(state.staging_root, units, exc) from None
                    if progress is not None:
                        progress.update(results[unit.index])
                submit(len(finished))
        finally:
            os.unlink(path)
        return results


def largest_first(units: list[Unit]) -> list[Unit]:
    """``units`` in the order a pool should take them: the largest first (units of unknown size, 0, last, each
    group in plan order). Workers that take the next unit as they free up then end close together: a large unit
    taken last would leave the other workers idle while it runs (longest-processing-time-first scheduling, at
    most 4/3 of the best finish). Which worker runs a unit never changes a byte of its output."""
    return sorted(units, key=lambda u: -u.size)


def commit_unit(task: Task, unit: Unit, state: StageState) -> UnitResult:
    """Run ``task`` on ``unit`` in a fresh staging dir, move its files into place (those of the segment
    directories the task and the stage's plan name: appended to this process's segments, base/segments.py),
    then append the unit's journal line.

    Returns the unit's :class:`~tokenmill.engine.stage.UnitResult`, with this worker's peak memory and
    the unit's wall time filled in (kept out of the outputs' bytes).
    """
    staging = state.staging(unit)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    started, cpu = time.monotonic(), time.process_time()
    result = task(unit, staging)
    kind = getattr(task, "output", None)  # the typed output the task's stage hands on (engine/outputs.py)
    if kind is not None:
        output(result, kind, stage=state.key, index=unit.index)  # a StageError before the marker is written
    result.seconds = time.monotonic() - started
    result.cpu_seconds = time.process_time() - cpu
    result.peak_rss_mb = process_peak_rss_mb()
    # the intermediates of the directories the task names go to this process's segments (base/segments.py)
    roots = (*getattr(task, "segments", ()), *state.segments)
    placed, files = segments.append_staged(state.out, staging, roots, state.run_id, state.root)
    for rel in files:
        dest = state.out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        move_into_place(staging / rel, dest, state.root / "tmp")
    shutil.rmtree(staging)  # the run's staging root stays until the stage ends (StageState.end_staging): a
    # worker removing it when it looked empty raced another worker creating its unit's staging dir there
    record = result.to_dict()
    store = getattr(state, "store", None)
    if store is not None:  # object storage: final keys, then the marker key (engine/store.py)
        publish_unit(store, state.out, files, str(state.marker(unit).relative_to(state.out)),
                     json.dumps(record, sort_keys=True).encode())
    journal.append(state.root / "done", state.run_id, unit.name, record, placed)
    return result


def move_into_place(source: Path, dest: Path, spare: Path) -> None:
    """Rename ``source`` to ``dest``; from another filesystem (a staging directory on the node's own disk), copy
    it into ``spare`` (the stage's ``tmp/`` in the output: the same filesystem as ``dest``, cleared when the
    stage is prepared and when it ends) first, then rename, so ``dest`` is never seen half written and a copy
    a kill cut short is never left among the outputs."""
    try:
        os.replace(source, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        spare.mkdir(parents=True, exist_ok=True)
        tmp = spare / f"{dest.name}.{os.getpid()}.{os.urandom(4).hex()}.part"
        shutil.copyfile(source, tmp)
        os.replace(tmp, dest)
        os.unlink(source)


def _setup(task: Task) -> None:
    setup = getattr(task, "setup", None)
    if callable(setup):
        setup()


# ---- inside a pool worker -------------------------------------------------------------------------------

_INSTALLED: dict[str, Any] = {}  # the handle of the task this worker holds -> the task


def _start_worker(preload: Sequence[str], main_pid: int, environ: dict[str, str]) -> None:
    """Pool initializer: first make sure this worker cannot outlive the run (engine/workers.py), then take
    the driver's environment (less the fork server's messages), then import the ``preload`` modules.

    A fork server lives as long as the process that started it and its children inherit *its* environment:
    without this, the workers of a later run in the same process (a notebook, a test session, a library
    caller) would read the environment of the first run, its ``TOKENMILL_CACHE`` among them, and write their
    caches where the driver never looks."""
    die_with_parent()
    watch_main_process(main_pid)
    adopt_environment(environ)
    for name in preload:
        importlib.import_module(name)


def adopt_environment(environ: dict[str, str]) -> None:
    """Make ``os.environ`` equal to ``environ`` (variables it lacks removed, the others set)."""
    for name in [k for k in os.environ if k not in environ]:
        del os.environ[name]
    os.environ.update(environ)


def _commit_installed(handle: tuple[str, str], unit: Unit, state: StageState) -> UnitResult:
    key, path = handle
    if key not in _INSTALLED:
        with open(path, "rb") as fh:
            task = pickle.load(fh)
        _setup(task)
        _INSTALLED.clear()  # one stage's task at a time
        _INSTALLED[key] = task
    return commit_unit(_INSTALLED[key], unit, state)
