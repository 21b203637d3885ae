"""The Ray executor: a stage's units on a Ray cluster, behind the same protocol as the local pool.

Units run on ``workers`` actors (one worker process each, ``num_cpus=1``). Used as a context manager, as
the tracks and ``tokenmill curate`` do, one set of actors serves every stage of the workflow (starting an
actor costs a process and the imports of tokenmill, seconds on a loaded machine; paid once per run, not per
stage). Each stage's task goes into the object store once; an actor fetches it with its first unit of the
stage and calls its ``setup()`` then, once per worker process and stage (a tokenizer or a language-ID model
is never shipped or built per unit). Units are handed to idle actors one at a time
(:meth:`RayExecutor._calls`); each actor runs the same :func:`~tokenmill.engine.local.commit_unit` as the
local executor (staging, rename, marker), so outputs are byte-identical to a local run and a resume after
a killed driver starts from the same markers.

An actor that dies mid-unit, its worker process killed or its whole node lost, is dropped: its unit goes to
the next idle actor (at most ``retries`` times per unit; the retry wipes the staging directory the dead
attempt left) and a new actor is started in its place, which takes units once it is up (on a node that
has a free CPU: when a node is gone for good, its replacement waits and the run goes on on the nodes
left). A unit lost more than ``retries`` times, or a stage left with no actor that can start for
:data:`START_TIMEOUT_S`, fails the run with :class:`~tokenmill.errors.ClusterError`; the committed units
stay and the same command resumes from them.

A task that loops over rounds of per-partition work (``fans_out = True``: connected components, see
:mod:`tokenmill.engine.fanout`) has its unit driven from the driver process (the loop holds a few booleans
per round), and each of its per-partition calls runs on the actors, retried like the units.

Actors, not Ray Data: a unit is already a bounded, self-describing slice (a byte range, a row-group
range, a hash partition) whose task writes files and returns one small result, so there is nothing to
stream between operators; actors give the once-per-worker setup and Ray's restarts and retries.

The output directory must be visible to every node (a shared filesystem); for an ``s3://`` output, the work
directory the run writes before it publishes (``TOKENMILL_CACHE``) must be. The actors run with the
driver's object storage settings (:data:`STORAGE_ENV`: credentials, endpoint, region), so an ``s3://``
input is read by every node from where the driver reads it. Without ``address`` a local
cluster is started (and shut down by :meth:`close`); with one, the driver joins that cluster.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import logging
import os
import socket
from collections import Counter, deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from tokenmill._extras import require
from tokenmill.engine import fanout
from tokenmill.engine.local import Held, _setup, commit_unit
from tokenmill.engine.stage import Task, Unit, UnitResult
from tokenmill.engine.workers import watch_main_process
from tokenmill.errors import ClusterError

if TYPE_CHECKING:
    from tokenmill.engine.workflow import StageState


class UnitWorker:
    """One Ray actor: commits the units it is given with the task of their stage (set up once). It imports
    the ``preload`` modules as it starts (the track's task module), before its first unit arrives."""

    def __init__(self, preload: tuple[str, ...] = (), driver: tuple[str, int] | None = None) -> None:
        self.key: str | None = None
        self.task: Task | None = None
        if driver is not None and driver[0] == socket.gethostname():
            # the driver started this Ray instance on this host: a driver killed with kill -9 takes Ray's own
            # processes with it, and nothing is left to end the actors, which would go on committing units
            # beside the next run; each ends itself within half a second of the driver, as a pool worker does
            watch_main_process(driver[1])
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
    """``fan_out`` on Ray: the calls go to the executor's actors (one at a time each, at most as many actors as
    calls: a round of 2 calls never waits for a third worker process to start), results in call order."""

    def __init__(self, executor: RayExecutor, ray: Any):
        self.executor, self.ray = executor, ray

    def __call__(self, fn: Any, items: list) -> list:
        fn_ref = self.ray.put(fn)
        ex = self.executor
        done = dict(ex._calls(self.ray, ex._size(self.ray, len(items)), items, lambda a, item: a.call.remote(fn_ref, item)))
        return [done[i] for i in range(len(items))]


class RayExecutor(Held):
    """Runs each stage's units on ``workers`` Ray actors (default: every CPU of the cluster)."""

    name = "ray"

    def __init__(self, *, workers: int | None = None, address: str | None = None, retries: int = 3):
        self.workers, self.address, self.retries = workers, address, retries
        self._started = False  # whether this executor started (and so shuts down) the Ray runtime
        self._actors: list[Any] = []
        self._up: set[Any] = set()  # the actors known to be up (their __ray_ready__ ended)
        self._preload: tuple[str, ...] = ()  # modules every actor imports as it starts (prepare's)
        self._runs = itertools.count()
        self._cpus: int | None = None
        self._driver: tuple[str, int] | None = None  # (host, pid) of this driver when it started its own instance

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
        key, boxed = f"{id(self)}-{next(self._runs)}", [ray.put(task)]
        results: dict[int, UnitResult] = {}
        try:
            calls = self._calls(ray, self._size(ray, len(units)), units, lambda a, u: a.commit.remote(key, boxed, u, state))
            for _, (index, result) in calls:
                results[index] = result
                if progress is not None:
                    progress.update(result)
        finally:
            if not self._held:
                self._release()
        return results

    def _calls(self, ray: Any, n: int, items: list, submit: Callable[[Any, Any], Any]) -> Iterator[tuple[int, Any]]:
        """``submit(actor, item)`` for every item on up to ``n`` actors, one item at a time each; yields
        ``(position, result)`` as they end. An actor that dies is replaced (:meth:`_replace`) and its item
        goes to the next idle actor; an actor takes items only once it is up (``__ray_ready__``)."""
        pending, lost = deque(range(len(items))), Counter()
        idle = [a for a in self._pool(ray, n) if a in self._up]
        starting = {a.__ray_ready__.remote(): a for a in self._pool(ray, n) if a not in self._up}
        running: dict[Any, tuple[Any, int]] = {}
        while pending or running:
            while pending and idle:
                position = pending.popleft()
                actor = idle.pop()
                running[submit(actor, items[position])] = (actor, position)
            ready, _ = ray.wait([*running, *starting], num_returns=1, timeout=None if running else START_TIMEOUT_S)
            if not ready:
                raise ClusterError(f"no Ray worker could start in {START_TIMEOUT_S} s (the cluster has no free CPU "
                                   f"left: its nodes were lost?); the committed units stay: run the same command again "
                                   f"on a cluster with free CPUs to resume")
            ref = ready[0]
            if ref in starting:
                actor = starting.pop(ref)
                if self._alive(ray, ref, actor):
                    idle.append(actor)
                else:
                    starting.update(self._replace(ray, actor))
                continue
            actor, position = running.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                lost[position] += 1
                if lost[position] > self.retries:
                    raise ClusterError(f"a unit's Ray worker died {lost[position]} times ({type(e).__name__}: its process "
                                       f"or its node was lost); the committed units stay: run the same command again "
                                       f"to resume") from e
                pending.appendleft(position)
                starting.update(self._replace(ray, actor))
                continue
            idle.append(actor)
            yield position, result

    def _alive(self, ray: Any, ready: Any, actor: Any) -> bool:
        """Whether the actor whose ``__ray_ready__`` ended is up (else it died as it started)."""
        try:
            ray.get(ready)
        except ray.exceptions.RayActorError:
            return False
        self._up.add(actor)
        return True

    def _replace(self, ray: Any, dead: Any) -> dict[Any, Any]:
        """Drops a dead actor and starts one in its place: ``{its ready reference: it}``."""
        self._up.discard(dead)
        self._actors = [a for a in self._actors if a != dead]
        (new,) = self._pool(ray, len(self._actors) + 1)[-1:]
        return {new.__ray_ready__.remote(): new}

    def _pool(self, ray: Any, n: int) -> list[Any]:
        """``n`` actors, the missing ones started now (asynchronously: Ray queues their first calls)."""
        if len(self._actors) < n:
            env = storage_env()
            # no restarts by Ray: a restarted actor whose node is gone waits for a free CPU with its calls
            # queued on it; _calls starts a new one instead and gives the lost unit to an actor that is up
            actor = ray.remote(UnitWorker).options(num_cpus=1, max_restarts=0, max_task_retries=0,
                                                   runtime_env={"env_vars": env} if env else None)
            while len(self._actors) < n:
                self._actors.append(actor.remote(self._preload, self._driver))
        return self._actors[:n]

    def _release(self) -> None:
        self._cpus = None
        if self._actors:
            import ray

            for a in self._actors:
                ray.kill(a)
            self._actors, self._up = [], set()

    def _size(self, ray: Any, n_units: int) -> int:
        if self.workers is None and self._cpus is None:
            self._cpus = int(ray.cluster_resources().get("CPU", 1))  # asked once per run, not per stage
        return max(1, min(self.workers or self._cpus or 1, n_units))

    def _run_driving(self, ray: Any, task: Task, units: list[Unit], state: StageState, progress: Any) -> dict[int, UnitResult]:
        """Units that fan out run here, in the driver (their loop holds a few booleans per round); each of
        their per-partition calls runs on an actor."""
        fanout.install(_ActorFanOut(self, ray))
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
            self._driver = (socket.gethostname(), os.getpid()) if address == "local" else None
        return ray


START_TIMEOUT_S = 600  # a stage whose every actor is lost waits this long for one to start, then fails

# the object storage settings of the driver's environment that botocore (s3fs) reads: the actors get the
# driver's, so every node reads and writes the bucket the driver names, at the endpoint it names
STORAGE_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
               "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE")


def storage_env() -> dict[str, str]:
    """The driver's :data:`STORAGE_ENV` settings that are set. A node's own settings (an instance role, its
    ``~/.aws``) serve where the driver has none: a variable the driver lacks is not sent."""
    return {name: os.environ[name] for name in STORAGE_ENV if os.environ.get(name)}


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
