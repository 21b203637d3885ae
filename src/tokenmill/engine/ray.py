"""The Ray executor: a stage's units on a Ray cluster, behind the same protocol as the local pool.

Each stage gets a pool of ``workers`` actors. The task goes into the object store once; every actor
receives it in its constructor and calls its ``setup()`` there, once per worker process (a tokenizer or a
language-ID model is never shipped or built per unit). Units are handed to idle actors one at a time
(``ray.util.ActorPool``); each actor runs the same :func:`~tokenmill.engine.local.commit_unit` as the
local executor (staging, rename, marker), so outputs are byte-identical to a local run and a resume after
a killed driver starts from the same markers. A worker process that dies mid-unit is restarted by Ray and
the unit retried (``retries`` times): the retry wipes the staging directory the dead attempt left.

A task that loops over rounds of per-partition work (``fans_out = True``: connected components, see
:mod:`tokenmill.engine.fanout`) runs its unit as a Ray task instead, and each of its per-partition calls
as a Ray task of its own, retried by Ray like the units.

Actors, not Ray Data: a unit is already a bounded, self-describing slice (a byte range, a row-group
range, a hash partition) whose task writes files and returns one small result, so there is nothing to
stream between operators; actors give the once-per-worker setup and Ray's restarts and retries.

The output directory must be visible to every node (a shared filesystem). Without ``address`` a local
cluster is started (and shut down by :meth:`close`); with one, the driver joins that cluster.
"""

from __future__ import annotations

from typing import Any

from tokenmill._extras import require
from tokenmill.engine.local import _setup, commit_unit
from tokenmill.engine.stage import Task, Unit, UnitResult


class UnitWorker:
    """One Ray actor: holds the stage's task (set up once) and commits the units it is given."""

    def __init__(self, task: Task):
        self.task = task
        _setup(task)

    def commit(self, unit: Unit, state: Any) -> tuple[int, UnitResult]:
        return unit.index, commit_unit(self.task, unit, state)


def _run_fanning_unit(task: Task, unit: Unit, state: Any, retries: int) -> tuple[int, UnitResult]:
    """A unit whose task fans out: its per-partition calls become Ray tasks (this task yields its CPU
    while it waits for them)."""
    from tokenmill.engine import fanout

    fanout.install(_RayFanOut(retries))
    try:
        _setup(task)
        return unit.index, commit_unit(task, unit, state)
    finally:
        fanout.install(None)


class _RayFanOut:
    """``fan_out`` on Ray: one task per call, one CPU each, results in call order."""

    def __init__(self, retries: int):
        self.retries = retries

    def __call__(self, fn: Any, items: list) -> list:
        import ray

        if not _REMOTE_CALL:
            _REMOTE_CALL.append(ray.remote(_call))
        call = _REMOTE_CALL[0].options(num_cpus=1, max_retries=self.retries)
        fn_ref = ray.put(fn)
        return ray.get([call.remote(fn_ref, item) for item in items])


_REMOTE_CALL: list[Any] = []  # the remote form of _call, defined once per process


def _call(fn: Any, item: Any) -> Any:
    return fn(item)


class RayExecutor:
    """Runs each stage's units on ``workers`` Ray actors (default: every CPU of the cluster)."""

    def __init__(self, *, workers: int | None = None, address: str | None = None, retries: int = 3):
        self.workers, self.address, self.retries = workers, address, retries
        self._started = False  # whether this executor started (and so shuts down) the Ray runtime

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def prepare(self, n_units: int, *, preload: tuple[str, ...] = ()) -> None:
        """Connect to (or start) the cluster now, while the driver still routes and plans."""
        self._connect()

    def run(self, task: Task, units: list[Unit], state: Any, progress: Any = None) -> dict[int, UnitResult]:
        ray = self._connect()
        from ray.util import ActorPool

        if getattr(task, "fans_out", False):
            return self._run_tasks(ray, task, units, state, progress)
        n = max(1, min(self.workers or int(ray.cluster_resources().get("CPU", 1)), len(units)))
        actor = ray.remote(UnitWorker).options(num_cpus=1, max_restarts=self.retries,
                                               max_task_retries=self.retries)
        task_ref = ray.put(task)
        actors = [actor.remote(task_ref) for _ in range(n)]
        results: dict[int, UnitResult] = {}
        try:
            for index, result in ActorPool(actors).map_unordered(lambda a, u: a.commit.remote(u, state), units):
                results[index] = result
                if progress is not None:
                    progress.update(result)
        finally:
            for a in actors:
                ray.kill(a)
        return results

    def _run_tasks(self, ray: Any, task: Task, units: list[Unit], state: Any, progress: Any) -> dict[int, UnitResult]:
        run = ray.remote(_run_fanning_unit).options(num_cpus=1, max_retries=self.retries)
        task_ref = ray.put(task)
        pending = [run.remote(task_ref, u, state, self.retries) for u in units]
        results: dict[int, UnitResult] = {}
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            index, result = ray.get(ready[0])
            results[index] = result
            if progress is not None:
                progress.update(result)
        return results

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False

    def _connect(self) -> Any:
        ray = require("ray", "ray", "run on a Ray cluster (--engine ray)")
        if not ray.is_initialized():
            ray.init(address=self.address, num_cpus=self.workers if self.address is None else None,
                     include_dashboard=False, log_to_driver=False, configure_logging=False)
            self._started = True
        return ray
