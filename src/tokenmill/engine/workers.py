"""Worker processes that never outlive their run, and a clear message when one dies.

* **No orphans.** A ``kill -9`` of the run at any moment, pool start-up included, leaves no process
  behind. On Linux the kernel does it, as a chain: the fork server asks (``PR_SET_PDEATHSIG``, first thing
  as it starts: ``engine/warm.py``) to be killed when the main process dies, and every process the fork
  server forks makes the same request about the fork server as its very first act (an at-fork hook, before it reads
  its task): the engine's workers, the short-lived tokenizer loader, any other pool's. Each request is
  followed by a look at the parent: one that died before the request was made would never signal, so the
  process exits at once. Elsewhere (no ``prctl``) a thread watches the parent and exits within half a
  second of it being gone. Engine workers also watch the main process, and ask about their own parent in
  the pool initializer (what covers ``spawn``, where the main process is that parent). Multiprocessing's
  resource tracker is not killed: it exits when the last of these processes has closed its pipe, after
  removing what they left (semaphores).
* **A dead worker is named.** When the operating system kills a worker (most often the out-of-memory
  killer), ``concurrent.futures`` reports only ``BrokenProcessPool``. ``worker_died`` says which units
  were running (their staging directories are still there), that memory most likely ran out, and that
  the same command resumes: finished units are kept.
"""

from __future__ import annotations

import ctypes
import functools
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill.errors import TokenmillError

if TYPE_CHECKING:
    from tokenmill.base.inputs import WorkUnit
    from tokenmill.engine.stage import Unit

_PR_SET_PDEATHSIG = 1


def _find_prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` on Linux, looked up once at import (never by a freshly forked child), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _find_prctl()


def die_with_parent() -> bool:
    """Have the kernel send SIGKILL to this process when its parent exits (Linux; elsewhere a no-op).

    Returns whether the request was taken (False: not Linux, or ``prctl`` unavailable).
    """
    return _PRCTL is not None and _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0


def die_with(parent: int) -> None:
    """Make sure this process, forked by ``parent``, does not outlive it: the kernel's signal where there
    is one, else a watching thread. A parent already gone (this process was re-parented before the
    request) means exit now."""
    signalled = die_with_parent()
    if os.getppid() != parent:
        os._exit(1)
    if not signalled:
        threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def guard_forked_children() -> None:
    """In this process (the fork server), make every child it forks from now on call :func:`die_with`
    first, before any Python code of the child runs. Their own children are left alone."""
    os.register_at_fork(after_in_child=functools.partial(_guard_child, os.getpid()))


def _guard_child(server: int) -> None:
    global _GUARDED
    if not _GUARDED:  # a child of the fork server (its children inherit True: their parent is not the server)
        _GUARDED = True
        die_with(server)


_GUARDED = False


def watch_main_process(main_pid: int) -> None:
    """A daemon thread that ends this worker within half a second of the main process being gone."""
    threading.Thread(target=_exit_without, args=(main_pid,), daemon=True).start()


def _exit_without(main_pid: int) -> None:
    while alive(main_pid):
        time.sleep(0.5)
    os._exit(1)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"  # a zombie is dead
    except (OSError, IndexError):
        return True


def start_worker(install: Callable[[Any], None], payload: bytes, main_pid: int) -> None:
    """Pool initializer: guard against orphaning first, then unpickle the task and install it."""
    die_with_parent()
    watch_main_process(main_pid)
    if not alive(main_pid):
        os._exit(1)
    install(pickle.loads(payload))


MAIN_PID_VARIABLE = "TOKENMILL_MAIN_PID"  # read by the fork server, which inherits this process's environment
_SERVER_ONLY: set[str] = set()


def server_only(name: str) -> str:
    """Mark the environment variable ``name`` as a message from the driver to the fork server it starts (the
    server reads it once and drops it): the pool workers, which take the driver's environment as they start
    (:func:`worker_environment`), do not take it. Returns ``name``."""
    _SERVER_ONLY.add(name)
    return name


def worker_environment() -> dict[str, str]:
    """This process's environment as a pool worker should have it: all of it but the fork server's messages."""
    return {k: v for k, v in os.environ.items() if k not in _SERVER_ONLY}


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


SERVER_MODULE = "tokenmill.engine._server"  # the fork server's one preload module (engine/warm.py's serve)


def guard_forkserver() -> None:
    """Make the fork server (started later, by whichever pool comes first) run :func:`serve` as it starts."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    from multiprocessing import forkserver  # noqa: PLC0415 -- only where the start method exists

    if in_fork_server():  # the fork server itself is no run's main process
        return
    os.environ[MAIN_PID_VARIABLE] = str(os.getpid())
    current = [m for m in getattr(forkserver._forkserver, "_preload_modules", None) or ["__main__"] if m != SERVER_MODULE]
    forkserver.set_forkserver_preload([SERVER_MODULE, *current])


def in_fork_server() -> bool:
    """Whether this process is a fork server starting (its preload modules are imported from its ``main``)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    from multiprocessing import forkserver  # noqa: PLC0415 -- only where the start method exists

    return _inside(forkserver.main)


def _inside(function: Any) -> bool:
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is function.__code__:
            return True
        frame = frame.f_back
    return False


guard_forkserver()  # at import: whichever pool starts the fork server first (the tokenizer loader's too)


def worker_died(staging_root: Path, units: list[Unit], exc: BaseException) -> TokenmillError:
    """The error to raise for ``BrokenProcessPool``: which units were running, why, and how to go on."""
    running = {p.name for p in staging_root.iterdir()} if staging_root.is_dir() else set()
    named = [u for u in units if u.name in running]
    where = "; ".join(_where(u) for u in named[:5]) or "a unit (not identified)"
    return TokenmillError(
        f"a worker process was killed while running {where}: most likely memory ran out (the operating "
        f"system's out-of-memory killer ends the largest process). Finished units are kept: run the same "
        f"command again to resume, with fewer --workers or a smaller --unit-bytes. ({type(exc).__name__})"
    )


def _where(unit: Unit) -> str:
    """A unit named with the file slice it reads, when its payload is an input work unit."""
    work = unit.payload
    if not hasattr(work, "file"):
        return unit.name
    more = f" and {len(work.packed)} more small file(s)" if getattr(work, "packed", ()) else ""
    return f"{unit.name} ({work.file.path}{_range(work)}{more})"


def _range(unit: WorkUnit) -> str:
    if unit.stop < 0:
        return ""
    what = "bytes" if unit.file.format == "jsonl" else "row groups" if unit.file.format == "parquet" else "batches"
    return f", {what} {unit.start:,}-{unit.stop:,}"
