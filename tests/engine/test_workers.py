"""The guards that keep a run's processes from outliving it (engine/workers.py), each path exercised for real:
the kernel's signal, the watching thread where there is none, a parent already gone, and the fork
server's hook leaving the children of its children alone."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from tokenmill.engine import workers

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

# A main process whose forked child asks to die with it, with no prctl (as on macOS): only the watching
# thread can end the child.
_WITHOUT_PRCTL = """
import os, time
from tokenmill.engine import workers
workers._PRCTL = None
parent = os.getpid()
child = os.fork()
if child == 0:
    workers.die_with(parent)
    time.sleep(600)
    os._exit(0)
print(child, flush=True)
time.sleep(600)
"""


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and workers.alive(pid):
        time.sleep(0.05)
    return not workers.alive(pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_kernel_holds_the_request_on_linux():
    child = os.fork()
    if child == 0:  # in a child: the request must not be made for the test process itself
        taken = workers.die_with_parent()
        held = ctypes.c_int(0)
        ctypes.CDLL(None).prctl(2, ctypes.byref(held), 0, 0, 0)  # PR_GET_PDEATHSIG
        os._exit(0 if taken and held.value == signal.SIGKILL else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0


def test_without_prctl_a_thread_ends_the_child_once_its_parent_is_gone():
    main = subprocess.Popen([sys.executable, "-c", _WITHOUT_PRCTL], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    child = int(main.stdout.readline())
    assert workers.alive(child)
    os.kill(main.pid, signal.SIGKILL)
    main.wait()
    try:
        assert _gone(child, 5), "the child outlived its parent"
    finally:
        if workers.alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_child_whose_parent_is_already_gone_exits_at_once():
    child = os.fork()
    if child == 0:
        workers.die_with(os.getppid() + 1 if os.getppid() > 1 else 2)  # not its parent: as if re-parented
        os._exit(0)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 1


def _fork_and_wait() -> int:
    child = os.fork()
    if child == 0:
        os._exit(7)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no fork server")
def test_a_worker_of_the_fork_server_may_fork_children_of_its_own():
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as pool:
        assert pool.submit(_fork_and_wait).result() == 7  # the fork server's hook is for its own children
