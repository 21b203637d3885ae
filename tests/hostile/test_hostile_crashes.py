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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


@pytest.mark.xfail(reason="known gap: a fork server killed while it is still importing can outlive the run "
                          "(seen on loaded machines); workers themselves always die with the run", strict=False)
def test_kill_9_during_pool_start_up_leaves_no_process(tmp_path):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 200)
    proc = subprocess.Popen([sys.executable, "-m", "tokenmill.cli", "pretrain", str(data), "--out", str(tmp_path / "out"),
                             "--workers", "2", "--unit-bytes", "2KiB", "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _children(proc.pid):
        time.sleep(0.02)  # the forkserver (and soon the workers) appear
    time.sleep(0.3)  # workers are starting: unpickling the tokenizer
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _group_alive(proc.pid):
        time.sleep(0.2)
    alive = _group_alive(proc.pid)
    if alive:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not alive, "processes of the killed run were still alive 20 s later"
