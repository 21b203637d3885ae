"""Run a workflow (an ordered list of stages) with any executor, resuming at the first unfinished unit.

State lives per stage under ``<out>/_state/<stage key>/``: ``run.json`` (the stage fingerprint), ``done/``
(the commit journals: one append-only file per worker process, a line per committed unit holding its
:class:`UnitResult`, ``engine/journal.py``) and ``tmp/<unit>/`` (staging; the stage's directory under
``$TOKENMILL_SCRATCH`` when set, :func:`tokenmill.base.segments.scratch_dir`). A stage's fingerprint chains the
previous stage's with its own name, version, parameters and unit names, so changing anything upstream
invalidates everything downstream; a restart whose fingerprint differs from the recorded one is refused
(``--overwrite`` starts again).

**A stage that has ended leaves one file, not one per unit.** Once every unit is committed, the driver
writes ``index.jsonl`` (one line per unit, in unit order: its name and its result), renamed into place
after an fsync, and only then removes ``done/`` (the journals); then the directories the plan drops
(``StagePlan.drop``: intermediates no later stage reads). The index is the stage's completion: a resume
that finds it reads the stage's results from it (one file) and runs none of its units. A kill at any point
is safe: before the rename the journals are all there and the next run writes the index again from them;
after it, the index is whole and what is left of ``done/`` and of the dropped directories is removed by the
next run. The index of each segment directory the stage wrote (``segments.jsonl``, :mod:`tokenmill.base.segments`)
is written from the journals just before the stage's own.

The executor protocol is one method: ``run(task, units, state, progress) -> {index: UnitResult}`` for
the units not yet committed. Executors own processes, retries and placement; the commit of one unit
(:func:`tokenmill.engine.local.commit_unit`) is the same everywhere. Two optional hooks: ``prepare(n_units,
preload=...)`` (start workers early, while the driver still plans) and the context manager protocol (one
set of workers for every stage of a workflow).

After the last stage a ``finalize`` callable, when given, runs once in the driver with every stage's
results (merge per-unit rejects, write the manifest); it runs again on a resume of a finished run, so it
must only derive files from committed ones.

With a ``store`` (an ``s3://`` output, :mod:`tokenmill.engine.store`) ``out`` is the local work directory:
each stage's fingerprint is uploaded when the stage is prepared, each unit is published by its commit,
the driver downloads the ``_state/`` files (and the ``pull`` prefixes) it lacks before ``finalize``, and
uploads what ``finalize`` wrote, the manifest last.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tokenmill.base import segments
from tokenmill.base.files import atomic_write, atomic_write_lines
from tokenmill.engine import journal
from tokenmill.engine.outdir import hold_output
from tokenmill.engine.stage import Stage, StageContext, Task, Unit, UnitResult
from tokenmill.engine.store import STATE, Store, publish_outputs, publish_state
from tokenmill.engine.store import pull as download
from tokenmill.errors import ConfigError


@dataclass(frozen=True)
class StageState:
    """Paths of one stage's bookkeeping under ``<out>/_state/<key>``."""

    out: Path
    key: str
    # staging directories are private to one run (process id + start time), never shared with another
    run_id: str = field(default_factory=lambda: f"{os.getpid()}-{time.time_ns()}")
    store: Store | None = None  # the object store the committed units are published to
    segments: tuple[str, ...] = ()  # the plan's segment directories (StagePlan.segments)

    @property
    def root(self) -> Path:
        return self.out / "_state" / self.key

    def marker(self, unit: Unit) -> Path:
        return self.root / "done" / f"{unit.name}.json"

    @property
    def staging_base(self) -> Path:
        """Where units stage their files: ``tmp/`` in the state directory, or the stage's directory under
        ``$TOKENMILL_SCRATCH`` (a node's own disk: :func:`tokenmill.base.segments.scratch_dir`)."""
        return segments.scratch_dir(self.root) or self.root / "tmp"

    @property
    def staging_root(self) -> Path:
        """This run's staging directories' parent (one directory per unit being staged)."""
        return self.staging_base / self.run_id

    def staging(self, unit: Unit) -> Path:
        return self.staging_root / unit.name

    @property
    def index(self) -> Path:
        return self.root / "index.jsonl"

    def prepare(self, fingerprint: str) -> None:
        """Create the state dirs; refuse to resume a stage made with other inputs or settings."""
        run_file = self.root / "run.json"
        if run_file.exists():
            previous = _read_json(run_file) or {}
            if previous.get("fingerprint") != fingerprint:
                raise ConfigError(
                    f"{self.out} holds a run whose stage {self.key!r} was made with other inputs or settings; "
                    "use another --out, or pass --overwrite to start again"
                )
        (self.root / "done").mkdir(parents=True, exist_ok=True)
        for base in {self.root / "tmp", self.staging_base}:
            shutil.rmtree(base, ignore_errors=True)  # staging left by killed runs (the output is locked)
        try:
            self.staging_base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if segments.scratch_root() is None:
                raise
            raise ConfigError(f"{segments.SCRATCH_ENV}={segments.scratch_root()}: cannot make the staging directory "
                              f"there ({exc.strerror}); name a writable directory on this node's disk, or unset it") from exc
        atomic_write(run_file, json.dumps({"fingerprint": fingerprint}).encode())
        if self.store is not None:
            publish_state(self.store, self.root)

    def end_staging(self) -> None:
        """Remove this run's staging root once the stage is over (left when a unit failed: the next run clears it)."""
        try:
            self.staging_root.rmdir()
        except OSError:
            pass  # absent (no unit ran) or not empty (a unit failed)

    def committed(self, units: Sequence[Unit]) -> dict[int, UnitResult]:
        """The results of the committed units: the stage's index when it has ended, else its journals (and any
        markers) in ``done/`` (``engine/journal.py``: one listing, then one read per file, never a lookup per
        unit)."""
        ended = self.ended(units)
        if ended is not None:
            return ended
        found = journal.committed_results(self.root / "done")
        return {u.index: UnitResult.from_dict(found[u.name]) for u in units if u.name in found}

    def ended(self, units: Sequence[Unit]) -> dict[int, UnitResult] | None:
        """The results of ``units`` when the stage has ended (its index is there), else None; read line by line,
        so memory holds the results, never the file's text besides."""
        index_of = {u.name: u.index for u in units}
        done: dict[int, UnitResult] = {}
        try:
            with open(self.index, "rb") as fh:
                for line in fh:
                    row = json.loads(line)
                    if row["unit"] in index_of:
                        done[index_of[row["unit"]]] = UnitResult.from_dict(row["result"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):  # not written by this engine (an index is renamed in whole)
            return None
        return done

    def end(self, units: Sequence[Unit], results: dict[int, UnitResult], drop: Sequence[str] = (), *,
            ran: bool = True) -> None:
        """Every unit is committed: write the index (unless this run found it and ran no unit), then remove
        the markers and the ``drop`` directories."""
        if ran or not self.index.exists():
            # where the units' files in segments lie, before the index that says the stage has ended
            segments.write_indexes(self.out, journal.committed_files(self.root / "done"))
            atomic_write_lines(self.index, (json.dumps({"unit": u.name, "result": results[u.index].to_dict()},
                                                       sort_keys=True).encode() for u in units))
            if self.store is not None:
                self.store.put(self.index, self._rel(self.index))
        if self.store is not None:
            self.store.delete(self.store.files(self._rel(self.root / "done") + "/"))
            for rel in drop:
                self.store.delete(self.store.files(rel.rstrip("/") + "/"))
        journal.close()  # this process's journal of the stage (a run with one worker commits here)
        segments.close()  # and its segments
        shutil.rmtree(self.root / "done", ignore_errors=True)
        for base in {self.root / "tmp", self.staging_base}:
            shutil.rmtree(base, ignore_errors=True)
        for rel in drop:
            shutil.rmtree(self.out / rel, ignore_errors=True)
            _remove_empty_parents(self.out / rel, self.out)

    def _rel(self, path: Path) -> str:
        return str(path.relative_to(self.out))


class Executor(Protocol):
    def run(self, task: Task, units: list[Unit], state: StageState, progress: Any) -> dict[int, UnitResult]:
        """Run ``task`` over ``units`` (none committed yet), committing each; results by unit index."""
        ...


def stage_fingerprint(previous: str, stage: Stage, params: dict[str, Any], units: Sequence[Unit]) -> str:
    h = hashlib.sha256(previous.encode())
    h.update(f"\0{stage.key}\0".encode())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    for u in units:
        h.update(f"\0{u.index}:{u.name}".encode())
    return h.hexdigest()


def run_workflow(
    stages: Sequence[Stage],
    *,
    out: str | Path,
    fingerprint: str,
    executor: Executor,
    progress: Callable[[str, list[Unit], dict[int, UnitResult]], Any] | None = None,
    overwrite: bool = False,
    finalize: Callable[[StageContext], Any] | None = None,
    locked: bool = False,
    store: Store | None = None,
    pull: Sequence[str] = (),
) -> dict[str, list[UnitResult]]:
    """Run every stage in order, then ``finalize``; return each stage's results in unit order.

    ``fingerprint`` covers the workflow's inputs and settings; ``progress(stage_key, units, done)``, when
    given, returns a progress object with ``update(result)`` and ``close()`` for the executor to drive.
    The output directory is locked for the whole run and ``overwrite`` clears what tokenmill wrote there
    (:func:`tokenmill.engine.outdir.hold_output`); ``locked=True`` when the caller already holds it.
    ``store``: publish to object storage (module docstring); ``pull``: more prefixes ``finalize`` reads.
    """
    out = Path(out)
    if not locked:
        with hold_output(out, overwrite=overwrite):
            return _run_stages(stages, out, fingerprint, executor, progress, finalize, store, pull)
    return _run_stages(stages, out, fingerprint, executor, progress, finalize, store, pull)


def _run_stages(stages, out: Path, fingerprint: str, executor: Executor, progress, finalize, store=None,
                pull: Sequence[str] = ()) -> dict:
    results: dict[str, list[UnitResult]] = {}
    chained = fingerprint
    for stage in stages:
        plan = stage.plan(StageContext(out=out, results=dict(results)))
        chained = stage_fingerprint(chained, stage, plan.params, plan.units)
        state = StageState(out, stage.key, store=store, segments=plan.segments)
        state.prepare(chained)
        done = state.committed(plan.units)
        todo = [u for u in plan.units if u.index not in done]
        bar = progress(stage.key, plan.units, done) if progress else None
        if todo:
            done.update(executor.run(plan.task, todo, state, bar))
            state.end_staging()
        state.end(plan.units, done, plan.drop, ran=bool(todo))
        if bar is not None:
            bar.close()
        results[stage.name] = [done[u.index] for u in plan.units]
    if store is not None:
        return _finalize_remote(store, out, results, finalize, pull)
    if finalize is not None:
        finalize(StageContext(out=out, results=dict(results)))
    return results


def _finalize_remote(store: Store, out: Path, results: dict, finalize, pull: Sequence[str]) -> dict:
    """Download what finalize reads, run it in the work directory, upload what it wrote (manifest last)."""
    download(store, out, (f"{STATE}/", *pull))
    if finalize is not None:
        finalize(StageContext(out=out, results=dict(results)))
    committed = {rel for stage in results.values() for r in stage for rel in r.outputs}
    publish_outputs(store, out, committed)
    return results


def _remove_empty_parents(path: Path, top: Path) -> None:
    """Remove the directories above ``path`` that are left empty, up to (not including) ``top``."""
    for parent in path.parents:
        if parent == top or top not in parent.parents:
            return
        try:
            parent.rmdir()
        except OSError:  # not empty (another stage's files), or already gone
            return


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # torn or missing marker: the unit is redone
