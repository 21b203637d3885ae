"""The local engine: a pool of processes over work units, with atomic commits and exact resume.

A *task* is a picklable callable ``task(unit, staging_dir) -> dict`` that writes its outputs under
``staging_dir`` (laid out like the output directory) and returns a JSON-able result (counts, file names).
The engine owns everything else:

* **Atomic commit.** Each unit writes into ``<out>/_state/tmp/<unit>/``; when the task returns, every file
  is renamed into place (``os.replace``) and only then is the completion marker
  ``<out>/_state/done/<unit>.json`` written (temporary name, fsync, rename). A unit without a marker is
  redone from scratch and overwrites whatever a killed attempt left, so a run killed with ``kill -9``
  and started again ends with the same bytes.
* **Determinism.** Output names derive from the unit index, never from the worker or the finishing order,
  and results are returned in unit order: 1 worker or N give identical bytes.
* **Resume guard.** ``_state/run.json`` records the fingerprint of the run's inputs and settings; a
  restart with different ones is refused instead of silently mixing outputs.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.connection
import os
import shutil
import threading
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from tokenmill._guard import allowed_workers
from tokenmill.engine.progress import Progress
from tokenmill.errors import ConfigError
from tokenmill.io.base import WorkUnit

Task = Callable[[WorkUnit, Path], dict]


@dataclass(frozen=True)
class RunState:
    """Paths of a run's bookkeeping under ``<out>/_state``."""

    out: Path

    @property
    def root(self) -> Path:
        return self.out / "_state"

    def marker(self, unit: WorkUnit) -> Path:
        return self.root / "done" / f"{unit.name}.json"

    def staging(self, unit: WorkUnit) -> Path:
        return self.root / "tmp" / unit.name

    def prepare(self, fingerprint: str, *, overwrite: bool) -> None:
        """Create the state dirs; refuse to resume a run made with other inputs or settings."""
        run_file = self.root / "run.json"
        if overwrite and self.out.exists():
            shutil.rmtree(self.out)
        if run_file.exists():
            previous = json.loads(run_file.read_text()).get("fingerprint")
            if previous != fingerprint:
                raise ConfigError(
                    f"{self.out} holds an unfinished or finished run made with other inputs or settings; "
                    "use another --out, or pass --overwrite to start again"
                )
        (self.root / "done").mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        atomic_write(run_file, json.dumps({"fingerprint": fingerprint}).encode())


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def run_one(task: Task, unit: WorkUnit, state: RunState) -> dict:
    """Run ``task`` on ``unit`` and commit its outputs atomically. Runs inside a worker process."""
    staging = state.staging(unit)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    result = task(unit, staging)
    result["peak_rss_mb"] = process_peak_rss_mb()  # of this worker so far; kept out of the outputs' bytes
    for src in sorted(p for p in staging.rglob("*") if p.is_file()):
        dest = state.out / src.relative_to(staging)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)
    shutil.rmtree(staging)
    atomic_write(state.marker(unit), json.dumps(result, sort_keys=True).encode())
    return result


def process_peak_rss_mb() -> float:
    """This process's peak resident memory in MB (``VmHWM`` on Linux, else ``ru_maxrss``)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource
    import sys

    scale = 1 / 1024 if sys.platform != "darwin" else 1 / (1024 * 1024)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale, 1)


def _load_marker(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # torn or missing marker: the unit is redone


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def run_units(
    units: Sequence[WorkUnit],
    task: Task,
    *,
    out: Path,
    fingerprint: str,
    workers: int | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
) -> list[dict]:
    """Run ``task`` over every unit not already committed; return all results in unit order."""
    state = RunState(Path(out))
    state.prepare(fingerprint, overwrite=overwrite)
    results: dict[int, dict] = {}
    for unit in units:
        done = _load_marker(state.marker(unit))
        if done is not None:
            results[unit.index] = done
    todo = [u for u in units if u.index not in results]
    bar = Progress(total_units=len(units), total_bytes=sum(_unit_bytes(u) for u in units), enabled=progress)
    bar.skip(len(results), [results[i] for i in results])
    n = allowed_workers(min(workers or default_workers(), max(1, len(todo))))
    if n == 1:
        for unit in todo:
            results[unit.index] = run_one(task, unit, state)
            bar.update(results[unit.index])
    else:
        _run_pool(task, todo, state, n, results, bar)
    bar.close()
    return [results[u.index] for u in units]


def _run_pool(task: Task, todo: list[WorkUnit], state: RunState, n: int, results: dict, bar: Progress) -> None:
    # forkserver: workers start from a clean process, never from a parent whose tokenizer thread pools
    # are already running (a fork of those can deadlock).
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    # The task (with its tokenizer) is sent once per worker, not once per unit: unpickling it rebuilds
    # the encoders, which costs far more than a small unit.
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_install_task, initargs=(task,)) as pool:
        pending = {pool.submit(_run_installed, u, state): u for u in todo}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                unit = pending.pop(fut)
                results[unit.index] = fut.result()
                bar.update(results[unit.index])


_WORKER_TASK: list[Task] = []


def _install_task(task: Task) -> None:
    _WORKER_TASK[:] = [task]
    threading.Thread(target=_exit_with_parent, daemon=True).start()


def _exit_with_parent() -> None:
    """End this worker as soon as the main process dies (``kill -9``): an orphan must not go on committing
    units beside the run that resumes."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)


def _run_installed(unit: WorkUnit, state: RunState) -> dict:
    return run_one(_WORKER_TASK[0], unit, state)


def _unit_bytes(unit: WorkUnit) -> int:
    if unit.stop >= 0 and unit.file.format == "jsonl" and not unit.file.compression:
        return unit.stop - unit.start
    return unit.file.size

