"""A Ray cluster of several nodes on this machine, each started with ``ray start`` as a user starts one on a
real cluster (its own temp dir, its own resources), and an S3 server (moto's, in this process) for the runs'
inputs and outputs.

Every node runs ``ray start --block`` in a process group of its own: stopping a node kills that group, never
``ray stop`` (which stops every Ray process of the machine, other users' clusters included)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

import tokenmill

REPO = Path(__file__).resolve().parents[2]
# the `ray` command of this Python's environment (beside its interpreter), else the one on PATH
RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
# the nodes import the tokenmill this test imports; loopback only, so no token (a real cluster keeps Ray's
# token authentication: docs/scale.md)
ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(Path(tokenmill.__file__).parents[1]),
       # a node that stops answering is declared dead in about 2 s, not Ray's default 30 s
       "RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "1000",
       "RAY_health_check_failure_threshold": "3",
       "RAY_worker_niceness": "0"}  # on a shared machine, actors at the priority of the local engine's workers
STARTED = re.compile(r"ray start --address='([^']+)'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    name: str  # its custom resource, e.g. node_b
    temp_dir: Path
    process: subprocess.Popen
    log: Path

    def raylet(self) -> psutil.Process | None:
        """This node's raylet: the one whose session lives under this node's temp dir."""
        for p in psutil.Process(self.process.pid).children(recursive=True):
            try:
                if p.name() == "raylet" and str(self.temp_dir) in " ".join(p.cmdline()):
                    return p
            except psutil.NoSuchProcess:
                continue
        return None

    def running_units(self) -> list[psutil.Process]:
        """This node's worker processes inside a unit right now (Ray titles them ``ray::UnitWorker.commit``)."""
        raylet, found = self.raylet(), []
        for p in raylet.children(recursive=True) if raylet else []:
            try:
                if "UnitWorker.commit" in " ".join(p.cmdline()):
                    found.append(p)
            except psutil.NoSuchProcess:
                continue
        return found

    def ran_units(self) -> bool:
        """Whether a unit worker ever ran on this node (its worker logs name the actor's class)."""
        return any("UnitWorker" in p.read_text(errors="replace") for p in self.temp_dir.glob("session_*/logs/worker-*"))

    def stop(self) -> None:
        """``ray start --block`` and everything it started (its descendants, and its process group for any that
        were re-parented), with SIGKILL: a test's node keeps nothing worth a clean shutdown."""
        try:
            family = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        for p in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        psutil.wait_procs(family, timeout=10)


@dataclass
class Cluster:
    root: Path
    address: str = ""
    nodes: list[Node] = field(default_factory=list)

    def start(self, name: str, *, head: bool = False, timeout: float = 90) -> Node:
        return self.wait(self.launch(name, head=head), timeout=timeout)

    def launch(self, name: str, *, head: bool = False) -> Node:
        """Starts ``ray start`` for the node and returns at once (:meth:`wait` waits for it); RuntimeError
        where there is no ``ray`` command."""
        if RAY is None:
            raise RuntimeError("no `ray` command beside this Python or on PATH")
        # Ray's socket paths (temp dir + session_<date>_<pid>/sockets/plasma_store) must fit in 107 bytes: the
        # node's temp dir is a short one under the system's temporary directory, not below the test's tmp_path
        temp = Path(tempfile.mkdtemp(prefix=f"tmray-{name}-", dir="/tmp" if os.path.isdir("/tmp") else None))
        log = self.root / f"{name}.log"
        where = ["--head", "--port", str(free_port()), "--include-dashboard", "false"] if head else ["--address", self.address]
        cmd = [RAY, "start", *where, "--block", "--num-cpus", "1", "--temp-dir", str(temp), "--node-ip-address",
               "127.0.0.1", "--resources", json.dumps({name: 1}), "--disable-usage-stats"]
        with log.open("w") as out:
            process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **ENV},
                                       start_new_session=True)
        node = Node(name, temp, process, log)
        self.nodes.append(node)
        return node

    def wait(self, node: Node, *, timeout: float = 90) -> Node:
        """Waits until the node's raylet runs (and, for the head, its address is known)."""
        head = node is self.nodes[0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and node.process.poll() is None:
            said = node.log.read_text(errors="replace")
            if head and (m := STARTED.search(said)):
                self.address = m.group(1)
            if (not head or self.address) and node.raylet() is not None and "Ray runtime started" in said:
                return node
            time.sleep(0.5)
        raise RuntimeError(f"`ray start` for {node.name} did not come up: {node.log.read_text(errors='replace')[-2000:]}")

    def alive(self) -> list[dict]:
        """The cluster's alive nodes and their resources, asked by a driver of its own."""
        probe = (f"import json, ray; ray.init(address={self.address!r}, log_to_driver=False); "
                 "print(json.dumps([n['Resources'] for n in ray.nodes() if n['Alive']]))")
        done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **ENV}, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()
        for node in self.nodes:
            shutil.rmtree(node.temp_dir, ignore_errors=True)
