"""What a run's fork server does before it forks, in one place: guard, import, build, warm, freeze.

Every pool worker used to pay the same start-up before its first unit: importing pyarrow, numpy and the
task's and steps' modules, building the fast encoder (more than a CPU-second for a 150k-token vocabulary),
loading the language identifier. The local executor's fork server forks every worker (and the short-lived
tokenizer loader), so what it does as it starts is in all of them from their first instruction, in pages
they share (copy-on-write). The driver tells the server what to do through the environment it inherits
(the variables are the server's alone: :func:`~tokenmill.engine.workers.server_only`, never passed on to
workers), and the server's one preload module, :mod:`tokenmill.engine._server`, runs :func:`serve`:

1. **guard**: the server dies with the run, and so does every process it forks (engine/workers.py);
2. **import** the modules the run's tasks named (:func:`preload_in_forkserver`: the track's task module,
   the steps' modules; :data:`TASK_MODULES`);
3. **build** the run's fast encoder (:func:`encoder_hint`) into
   :data:`tokenmill.tokenize.backends.PREBUILT`, where :func:`~tokenmill.tokenize.backends.fast_for` finds it;
4. **warm** the steps that have a ``warm()`` (:func:`steps_hint`: ``language`` loads its identifier);
5. **freeze**: ``gc.freeze()`` moves all of it out of the garbage collector's sight, so a worker's full
   collections never walk those objects nor write to the pages it shares with the server (6% of an SFT
   worker's CPU, BENCHMARKS.md).

Only the first start of a fork server reads these: a server already running keeps what it has, and its
workers import their modules in their initializer. Everything after the guard is speculative: a module that
fails to import, an encoder that fails to build, a step that fails to warm only means each worker does it
itself, as before, and reports any error there. The server never encodes and starts no thread but the
guard's, so it can fork. Steps travel pickled, only those of tokenmill's own classes (importing another
package's module in the server could start anything).
"""

from __future__ import annotations

import base64
import contextlib
import gc
import importlib
import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill.base.inputs import estimate_units
from tokenmill.engine.workers import (  # importing it guards the fork server
    MAIN_PID_VARIABLE,
    alive,
    die_with_parent,
    guard_forked_children,
    guard_forkserver,
    in_fork_server,
    server_only,
    watch_main_process,
)

if TYPE_CHECKING:
    from tokenmill.engine.workflow import Executor
    from tokenmill.steps.contract import Step
    from tokenmill.tokenize.sources import TokenizerSpec
    from tokenmill.tokenize.tokenizer import Tokenizer

MODULES_VARIABLE = server_only("TOKENMILL_SERVER_MODULES")
ENCODER_VARIABLE = server_only("TOKENMILL_PREBUILD_TOKENIZER")
STEPS_VARIABLE = server_only("TOKENMILL_WARM_STEPS")
MAX_HINT = 64 << 10  # bytes of pickled steps an environment variable carries (Linux allows 128 KiB)
# what each workflow's workers import, whatever its steps: its task's module first, what it reads and writes
TASK_MODULES = {
    "pretrain": ("tokenmill.pretrain.run",),
    "sft": ("tokenmill.sft.run",),
    "curate": ("tokenmill.curate.workflows.tasks", "tokenmill.io", "tokenmill.io.documents",
               "tokenmill.report.rejects", "tokenmill.selection"),
}


# ---- in the driver: what the server will do ---------------------------------------------------------------

def preload_in_forkserver(modules: Sequence[str]) -> None:
    """Have the fork server import ``modules`` once as it starts (after its guard), so that every process it
    forks starts with them imported instead of importing them again (about a CPU-second per worker on 2
    cores). Adds to the modules named before; read by the server's first start only."""
    guard_forkserver()
    named = [m for m in os.environ.get(MODULES_VARIABLE, "").split(",") if m]
    os.environ[MODULES_VARIABLE] = ",".join(dict.fromkeys([*named, *modules]))


@contextlib.contextmanager
def encoder_hint(spec: TokenizerSpec | Tokenizer | None) -> Iterator[None]:
    """Name the tokenizer ``spec`` to a fork server started inside the block, which builds its fast encoder
    (local paths and ``"default"`` only: a hub name is resolved by the run itself, where its errors show)."""
    path = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else None
    if path is None or not (path == "default" or Path(path).expanduser().exists()):
        yield
        return
    with _set(ENCODER_VARIABLE, path):
        yield


@contextlib.contextmanager
def steps_hint(steps: Sequence[Step]) -> Iterator[None]:
    """Name the steps to warm to a fork server started inside the block."""
    warm = [s for s in steps if _ours(s) and callable(getattr(s, "warm", None))]
    try:
        payload = base64.b64encode(pickle.dumps(warm, protocol=pickle.HIGHEST_PROTOCOL)).decode() if warm else ""
    except Exception:  # noqa: BLE001 -- speculative: an unpicklable step is set up by each worker instead
        payload = ""
    if not payload or len(payload) > MAX_HINT:
        yield
        return
    with _set(STEPS_VARIABLE, payload):
        yield


def start_workers(executor: Executor, steps: Sequence[Step], *, unit_bytes: int | None) -> Callable[[list], None] | None:
    """The ``on_files`` hook of :func:`tokenmill.job.plan_inputs` that starts a curate run's workers warm
    (None when the executor cannot start them ahead)."""
    prepare = getattr(executor, "prepare", None)
    if not callable(prepare):
        return None

    def start(files: list) -> None:
        with steps_hint(steps):
            prepare(estimate_units(files, unit_bytes=unit_bytes), preload=preload_modules(steps))

    return start


def preload_modules(steps: Sequence[Step]) -> tuple[str, ...]:
    """The modules a curate run's workers import: the tasks', then the steps' own."""
    own = [type(s).__module__ for s in steps if _ours(s)]
    return tuple(dict.fromkeys([*TASK_MODULES["curate"], *own]))


@contextlib.contextmanager
def _set(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


# ---- in the fork server ----------------------------------------------------------------------------------

def serve() -> dict[str, Any]:
    """In the fork server, as it starts: guard, import, build, warm, freeze; what was done (for the tests).
    Anywhere else (a process that imports every module of the package) nothing: the driver's messages in the
    environment are the server's alone."""
    if not in_fork_server():
        return {}
    guard_server()
    done = {"modules": import_modules(), "encoder": build_encoder(), "warmed": warm_steps()}
    gc.freeze()
    return done


def guard_server() -> None:
    """The fork server dies with the main process (its id is in the environment it passed on), and every
    process it forks dies with the server. The main process may already be gone when this runs (it can be
    killed while the server starts); the kernel only signals deaths after the request, so it is checked
    once more afterwards, and watched."""
    die_with_parent()
    main = int(os.environ.get(MAIN_PID_VARIABLE) or 0)
    if main and not alive(main):
        os._exit(1)
    if main:
        watch_main_process(main)
    guard_forked_children()


def import_modules() -> list[str]:
    """Import the modules the driver named; those imported (never raises)."""
    named = [m for m in os.environ.pop(MODULES_VARIABLE, "").split(",") if m]
    imported = []
    for name in named:
        try:
            importlib.import_module(name)
            imported.append(name)
        except Exception:  # noqa: BLE001 -- speculative: each worker imports it (and reports) itself
            pass
    return imported


def build_encoder() -> bool:
    """Build the fast encoder the driver named, if any; whether one was built (never raises)."""
    spec = os.environ.pop(ENCODER_VARIABLE, None)  # not passed on to the processes this one forks
    if not spec:
        return False
    try:
        from tokenmill.tokenize.backends import PREBUILT, fast_for, source_key  # noqa: PLC0415 -- the server's only
        from tokenmill.tokenize.sources import resolve  # noqa: PLC0415

        source = resolve(spec)
        PREBUILT[source_key(source)] = fast_for(source)
        return True
    except Exception:  # noqa: BLE001 -- speculative: the run builds (and reports) it where it is needed
        return False


def warm_steps() -> list[str]:
    """Warm the steps the driver named, if any; the names of those warmed (never raises)."""
    payload = os.environ.pop(STEPS_VARIABLE, None)  # not passed on to the processes this one forks
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


def _ours(step: object) -> bool:
    return type(step).__module__.startswith("tokenmill.")
