"""The Ray executor: the same stages, units and commits as the local engine, scheduled by Ray.

Each stage gets a pool of Ray actors (one per worker); an actor receives the stage's task once, when it
is created, and runs its ``setup()`` once (a tokenizer, a language-ID or quality model), then
commits units one after another with the same :func:`~tokenmill.engine.local.commit_unit` as the local
engine: staging under ``<out>/_state/<stage>/tmp/<unit>``, files renamed into place, then the completion
marker. The driver keeps every actor busy (``ray.wait`` on one call per actor) and returns results by
unit index, so the output bytes do not depend on the number of workers or on which finished first.

Faults are Ray's to handle: an actor whose process dies mid-unit is restarted (its ``setup()`` runs
again) and the unit is retried (``max_retries`` times); the retried unit starts from a clean staging
directory, so its output is the same. A driver killed midway loses nothing committed: the next run
skips the units that have markers. Why actors and not Ray Data: a unit is already a bounded slice of a
file that commits its own files atomically under a name fixed by its index; Ray Data's blocks would move
the records through the object store to a writer and lose that per-unit commit, which is what makes
resume and byte-identical output hold. Corpus-wide stages (dedup partitions) are units like any other.

On a cluster, ``--out`` must be a filesystem every node sees (NFS, Lustre, a mounted bucket), and every
node needs tokenmill installed (the same version as the driver).
"""

from __future__ import annotations

from typing import Any

from tokenmill._extras import require


def ensure_ray(*, address: str | None, num_cpus: int | None) -> Any:
    """Connect to ``address`` (``auto`` or ``ray://...``), or start a local cluster with ``num_cpus``."""
    ray = require("ray", "ray", "run on a Ray cluster")
    if not ray.is_initialized():
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return ray


def _worker_class(ray: Any, max_retries: int) -> Any:
    @ray.remote(max_restarts=max_retries, max_task_retries=max_retries)
    class UnitWorker:
        def __init__(self, task: Any):
            from tokenmill.engine.local import _setup

            self.task = task
            _setup(task)

        def run(self, unit: Any, state: Any) -> dict:
            from tokenmill.engine.local import commit_unit

            return commit_unit(self.task, unit, state).to_dict()

    return UnitWorker


class RayExecutor:
    """Run a stage's units on Ray actors. ``workers`` defaults to the cluster's CPUs."""

    def __init__(self, *, workers: int | None = None, address: str | None = None, max_retries: int = 3):
        self.workers, self.address, self.max_retries = workers, address, max_retries

    def run(self, task: Any, units: list, state: Any, progress: Any = None) -> dict:
        from tokenmill.engine.stage import UnitResult

        ray = ensure_ray(address=self.address, num_cpus=self.workers)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n = max(1, min(self.workers or cpus, len(units)))
        worker = _worker_class(ray, self.max_retries)
        # the task travels inside each actor's creation spec (not as an object-store reference), so a
        # restarted actor can always rebuild it
        actors = [worker.remote(task) for _ in range(n)]
        results: dict[int, UnitResult] = {}
        todo = list(reversed(units))
        running: dict[Any, tuple[Any, Any]] = {}
        try:
            for actor in actors:
                if todo:
                    unit = todo.pop()
                    running[actor.run.remote(unit, state)] = (unit, actor)
            while running:
                (ref,), _ = ray.wait(list(running), num_returns=1)
                unit, actor = running.pop(ref)
                results[unit.index] = UnitResult.from_dict(ray.get(ref))
                if progress is not None:
                    progress.update(results[unit.index])
                if todo:
                    nxt = todo.pop()
                    running[actor.run.remote(nxt, state)] = (nxt, actor)
        finally:
            for actor in actors:
                ray.kill(actor)
        return results
