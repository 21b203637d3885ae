"""Curation's workers start warm: their modules imported and their models loaded once, by the fork server.

Every pool worker used to pay the same start-up before its first unit: importing pyarrow, numpy and the
steps' modules (the heuristics' character sets scan every Unicode code point at import) and loading the
language identifier, about a CPU-second each on 2 cores. The local executor's fork server forks every
worker, so what it does as it starts is in all of them from their first instruction, in pages they share
(copy-on-write): :func:`start_workers` starts the pool while the driver routes the inputs, with the run's
task and step modules as the server's preload modules (:func:`preload_modules`) and, last, this package's
:mod:`tokenmill.engine._warm_server`, which runs ``warm()`` of each step that has one.

A step's ``warm()`` loads what its ``setup()`` loads into a cache of the process (``language``: its
identifier, keyed by model and candidates), and starts no thread: the fork server must be able to fork.
The steps travel to the server pickled in the environment it inherits (:func:`hint`), only those of
tokenmill's own classes (importing another package's module in the server could start anything). Warming
is speculative: a step that fails to warm, or a fork server already running (it keeps the preload list it
started with), only means each worker loads as before, in its ``setup()``, and reports any error there.
"""

from __future__ import annotations

import base64
import contextlib
import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tokenmill.base.inputs import estimate_units
from tokenmill.engine.workers import server_only

VARIABLE = server_only("TOKENMILL_WARM_STEPS")
SERVER_MODULE = "tokenmill.engine._warm_server"
MAX_HINT = 64 << 10  # bytes of pickled steps an environment variable carries (Linux allows 128 KiB)
# what every curate worker runs, whatever the steps: the map stages' tasks and what they read and write
TASK_MODULES = ("tokenmill.curate.workflows.tasks", "tokenmill.io", "tokenmill.io.documents", "tokenmill.report.rejects",
                "tokenmill.selection")


def start_workers(executor: Any, steps: Sequence[Any], *, unit_bytes: int | None) -> Callable[[list], None] | None:
    """The ``on_files`` hook of :func:`tokenmill.job.plan_inputs` that starts ``executor``'s workers warm
    (None when the executor cannot start them ahead)."""
    prepare = getattr(executor, "prepare", None)
    if not callable(prepare):
        return None

    def start(files: list) -> None:
        with hint(steps):
            prepare(estimate_units(files, unit_bytes=unit_bytes), preload=preload_modules(steps))

    return start


def preload_modules(steps: Sequence[Any]) -> tuple[str, ...]:
    """The modules a fork server imports for a run of ``steps``: the tasks', the steps' own, the warmer last."""
    own = [type(s).__module__ for s in steps if _ours(s)]
    return tuple(dict.fromkeys([*TASK_MODULES, *own, SERVER_MODULE]))


@contextlib.contextmanager
def hint(steps: Sequence[Any]) -> Iterator[None]:
    """Name the steps to warm to a fork server started inside the block."""
    warm = [s for s in steps if _ours(s) and callable(getattr(s, "warm", None))]
    try:
        payload = base64.b64encode(pickle.dumps(warm, protocol=pickle.HIGHEST_PROTOCOL)).decode() if warm else ""
    except Exception:  # noqa: BLE001 -- speculative: an unpicklable step is set up by each worker instead
        payload = ""
    if not payload or len(payload) > MAX_HINT:
        yield
        return
    previous = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = payload
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = previous


def warm_from_environment() -> list[str]:
    """In the fork server: warm the steps the driver named, if any; the names of those warmed (never raises)."""
    payload = os.environ.pop(VARIABLE, None)  # not passed on to the processes this one forks
    if not payload:
        return []
    try:
        steps = pickle.loads(base64.b64decode(payload))
    except Exception:  # noqa: BLE001 -- speculative: each worker sets its steps up itself
        return []
    warmed = []
    for step in steps:
        try:
            step.warm()
            warmed.append(step.name)
        except Exception:  # noqa: BLE001 -- this step's workers load (and report) it in setup()
            pass
    return warmed


def _ours(step: Any) -> bool:
    return type(step).__module__.startswith("tokenmill.")
