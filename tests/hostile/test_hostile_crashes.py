"""15.10: a worker killed by the OS is named with its unit and the run resumes; kill -9 leaves no process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import hostilekit as hk
import pytest

from tokenmill.errors import TokenmillError


@dataclass(frozen=True)
class KilledOnce:
    """A step that gets its worker SIGKILLed (as the OOM killer would) the first time it sees ``marker``."""

    marker: str
    flag: str

    def __call__(self, batch):
        ids = batch.column("id").to_pylist()
        if self.marker in ids and not os.path.exists(self.flag):
            Path(self.flag).write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)
        return batch, {}


def test_a_killed_worker_names_its_unit_and_memory_and_the_run_resumes(tmp_path):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 400)
    out = tmp_path / "out"
    step = KilledOnce("doc-350", str(tmp_path / "flag"))
    with pytest.raises(TokenmillError) as err:
        hk.pretrain([data], out, workers=2, unit_bytes=4 << 10, steps=[step])
    message = str(err.value)
    assert "memory ran out" in message and "unit-0000" in message and "a.jsonl" in message
    assert "Traceback" not in message
    manifest = hk.pretrain([data], out, workers=2, unit_bytes=4 << 10, steps=[step])
    assert manifest["counts"]["kept"] == 400


def _group_alive(pgid: int) -> list[str]:
    """The processes of group ``pgid`` that still run (zombies, dead but not yet reaped, do not count)."""
    out = subprocess.run(["ps", "-eo", "pid=,pgid=,stat=,args="], capture_output=True, text=True).stdout
    rows = [line.split(None, 3) for line in out.splitlines()]
    return [" ".join(r) for r in rows if len(r) >= 3 and int(r[1]) == pgid and not r[2].startswith("Z")]


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _gone_within(seconds: float, pgid: int) -> list[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.1)
    left = _group_alive(pgid)
    if left:
        os.killpg(pgid, signal.SIGKILL)
    return left


def _grandchildren(pid: int) -> list[int]:
    return [g for c in _children(pid) for g in _children(c)]


# When to kill the run: while the fork server starts (and imports), or once it has forked the pool's two
# workers and the child that loads the tokenizer (the third), while that child works.
_START_UP = {"fork server starting": lambda pid: bool(_children(pid)),
             "tokenizer loading": lambda pid: len(_grandchildren(pid)) >= 3}


@pytest.mark.parametrize("moment", list(_START_UP))
def test_kill_9_during_pool_start_up_leaves_no_process(tmp_path, moment):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 200)
    proc = subprocess.Popen([sys.executable, "-m", "tokenmill.cli", "pretrain", str(data), "--out", str(tmp_path / "out"),
                             "--workers", "2", "--unit-bytes", "2KiB", "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not _START_UP[moment](proc.pid):
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before the moment to kill it"
    time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = _gone_within(20, proc.pid)
    assert not left, f"processes of the run killed ({moment}) were still alive 20 s later: {left}"


# A main process that starts a pool of its own on the fork server (as the tokenizer loader does: no
# initializer of the engine's), whose one worker prints its pid and sleeps.
_OTHER_POOL = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
import tokenmill.engine.workers  # what any run imports: the fork server is guarded from its start
pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver"))
print(pool.submit(os.getpid).result(), flush=True)
pool.submit(time.sleep, 600)
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_every_child_of_the_fork_server_dies_with_the_run(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _OTHER_POOL], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    worker = int(proc.stdout.readline())
    assert worker != proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = _gone_within(10, proc.pid)
    assert not left, f"the fork server's child {worker} outlived the run: {left}"
