"""The Ray executor: a stage's units on a Ray cluster, behind the same protocol as the local pool.

Units run on ``workers`` actors (one worker process each, ``num_cpus=1``). Used as a context manager, as
the tracks and ``tokenmill curate`` do, one set of actors serves every stage of the workflow (starting an
actor costs a process and the imports of tokenmill, seconds on a loaded machine; paid once per run, not per
stage). Each stage's task goes into the object store once; an actor fetches it with its first unit of the
stage and calls its ``setup()`` then, once per worker process and stage (a tokenizer or a language-ID model
is never shipped or built per unit). Units are handed to idle actors one at a time
(``ray.util.ActorPool``); each actor runs the same :func:`~tokenmill.engine.local.commit_unit` as the
local executor (staging, rename, marker), so outputs are byte-identical to a local run and a resume after
a killed driver starts from the same markers. A worker process that dies mid-unit is restarted by Ray and
the unit retried (``retries`` times): the restarted actor fetches the task again, and the retry wipes the
staging directory the dead attempt left.

A task that loops over rounds of per-partition work (``fans_out = True``: connected components, see
:mod:`tokenmill.engine.fanout`) has its unit driven from the driver process (the loop holds a few booleans
per round), and each of its per-partition calls runs on the actors, retried by Ray like the units.

Actors, not Ray Data: a unit is already a bounded, self-describing slice (a byte range, a row-group
range, a hash partition) whose task writes files and returns one small result, so there is nothing to
stream between operators; actors give the once-per-worker setup and Ray's restarts and retries.

The output directory must be visible to every node (a shared filesystem). Without ``address`` a local
cluster is started (and shut down by :meth:`close`); with one, the driver joins that cluster.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import logging
import os
from typing import TYPE_CHECKING, Any, cast

from tokenmill._extras import require
from tokenmill.engine import fanout
from tokenmill.engine.local import Held, _setup, commit_unit
from tokenmill.engine.stage import Task, Unit, UnitResult

if TYPE_CHECKING:
    from tokenmill.engine.workflow import StageState


class UnitWorker:
    """One Ray actor: commits the units it is given with the task of their stage (set up once). It imports
    the ``preload`` modules as it starts (the track's task module), before its first unit arrives."""

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        self.key: str | None = None
        self.task: Task | None = None
        for name in preload:
            importlib.import_module(name)

    def commit(self, key: str, boxed: list, unit: Unit, state: StageState) -> tuple[int, UnitResult]:
        """``boxed`` holds the task's object reference (in a list, so Ray does not fetch it per call)."""
        task = self.task
        if key != self.key or task is None:  # the key is set with the task: both or neither
            import ray

            task = cast("Task", ray.get(boxed[0]))  # the reference holds the stage's task
            _setup(task)
            self.task, self.key = task, key
        return unit.index, commit_unit(task, unit, state)

    def call(self, fn: Any, item: Any) -> Any:
        """One call of a unit that fans out (:mod:`tokenmill.engine.fanout`)."""
        return fn(item)


class _ActorFanOut:
    """``fan_out`` on Ray: the calls go to the executor's actors (one at a time each), results in call order.
    ``actors(k)`` gives up to ``k`` of them (started on first need: a round of 2 calls never waits for a
    third worker process to start)."""

    def __init__(self, actors: Any):
        self.actors = actors

    def __call__(self, fn: Any, items: list) -> list:
        import ray
        from ray.util import ActorPool

        fn_ref = ray.put(fn)
        return list(ActorPool(self.actors(len(items))).map(lambda a, item: a.call.remote(fn_ref, item), items))


class RayExecutor(Held):
    """Runs each stage's units on ``workers`` Ray actors (default: every CPU of the cluster)."""

    name = "ray"

    def __init__(self, *, workers: int | None = None, address: str | None = None, retries: int = 3):
        self.workers, self.address, self.retries = workers, address, retries
        self._started = False  # whether this executor started (and so shuts down) the Ray runtime
        self._actors: list[Any] = []
        self._preload: tuple[str, ...] = ()  # modules every actor imports as it starts (prepare's)
        self._runs = itertools.count()
        self._cpus: int | None = None

    def prepare(self, n_units: int, *, preload: tuple[str, ...] = ()) -> None:
        """Connect to (or start) the cluster and start the actors now (their processes and their imports of
        ``preload`` go on in the cluster while the driver still routes, plans and loads its tokenizer)."""
        ray = self._connect()
        self._preload = tuple(preload)
        self._pool(ray, self._size(ray, n_units))

    def run(self, task: Task, units: list[Unit], state: StageState, progress: Any = None) -> dict[int, UnitResult]:
        ray = self._connect()
        if getattr(task, "fans_out", False):
            return self._run_driving(ray, task, units, state, progress)
        from ray.util import ActorPool

        n = self._size(ray, len(units))
        key, boxed = f"{id(self)}-{next(self._runs)}", [ray.put(task)]
        results: dict[int, UnitResult] = {}
        try:
            pool = ActorPool(self._pool(ray, n))
            for index, result in pool.map_unordered(lambda a, u: a.commit.remote(key, boxed, u, state), units):
                results[index] = result
                if progress is not None:
                    progress.update(result)
        finally:
            if not self._held:
                self._release()
        return results

    def _pool(self, ray: Any, n: int) -> list[Any]:
        """``n`` actors, the missing ones started now (asynchronously: Ray queues their first calls)."""
        if len(self._actors) < n:
            actor = ray.remote(UnitWorker).options(num_cpus=1, max_restarts=self.retries,
                                                   max_task_retries=self.retries)
            while len(self._actors) < n:
                self._actors.append(actor.remote(self._preload))
        return self._actors[:n]

    def _release(self) -> None:
        self._cpus = None
        if self._actors:
            import ray

            for a in self._actors:
                ray.kill(a)
            self._actors = []

    def _size(self, ray: Any, n_units: int) -> int:
        if self.workers is None and self._cpus is None:
            self._cpus = int(ray.cluster_resources().get("CPU", 1))  # asked once per run, not per stage
        return max(1, min(self.workers or self._cpus or 1, n_units))

    def _run_driving(self, ray: Any, task: Task, units: list[Unit], state: StageState, progress: Any) -> dict[int, UnitResult]:
        """Units that fan out run here, in the driver (their loop holds a few booleans per round); each of
        their per-partition calls runs on an actor."""
        fanout.install(_ActorFanOut(lambda k: self._pool(ray, self._size(ray, k))))
        results: dict[int, UnitResult] = {}
        try:
            _setup(task)
            for unit in units:
                results[unit.index] = commit_unit(task, unit, state)
                if progress is not None:
                    progress.update(results[unit.index])
        finally:
            fanout.install(None)
            if not self._held:
                self._release()
        return results

    def close(self) -> None:
        self._release()
        if self._started:
            import ray

            ray.shutdown()
            self._started = False

    def _connect(self) -> Any:
        ray = require("ray", "ray", "run on a Ray cluster (--engine ray)")
        if not ray.is_initialized():
            # no address (and no RAY_ADDRESS): a cluster of this run's own, even when another one runs on this
            # machine (Ray would join that one and refuse the CPU count)
            address = self.address or os.environ.get("RAY_ADDRESS") or "local"
            with _quiet_ray_start():
                ray.init(address=address, num_cpus=self.workers if address == "local" else None,
                         include_dashboard=False, log_to_driver=False, configure_logging=False)
            self._started = True
        return ray


VERBOSE_ENV = "TOKENMILL_RAY_VERBOSE"
# Ray's own notices while it starts or joins a cluster: the token-authentication banner of every local start
# ("ray._private.authentication"), "Found multiple active Ray instances ..." of --ray-address auto, ...
_RAY_NOTICES = ("ray", "ray._private.authentication")


@contextlib.contextmanager
def _quiet_ray_start():
    """Ray's start-up notices (its log lines below an error: the authentication banner, which cluster
    ``auto`` joined) kept off tokenmill's output, unless ``TOKENMILL_RAY_VERBOSE=1``. Only what is printed
    changes: Ray's settings stay as Ray chose them."""
    if os.environ.get(VERBOSE_ENV, "") not in ("", "0"):
        yield
        return
    loggers = [logging.getLogger(name) for name in _RAY_NOTICES]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
