"""A Ray cluster of nodes started with ``ray start`` on this machine, as a user starts one on a real cluster: each
node its own temp dir, its own resources (``--num-cpus``, a custom resource named after it) and its own
``ray start --block`` process, started in a session of its own. The same approach as the test tier's
``tests/cluster/clusterkit.py`` (benchmarks do not import from the tests).

Stopping: every node's processes are killed with SIGKILL (the descendants of its ``ray start`` process, then
its process group), never ``ray stop``, which stops every Ray process of the machine, other users' clusters
included. The caller finds any process left that way (a worker in a process group of its own) by the mark
each node puts in its environment, which every process Ray starts on it inherits."""

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

SRC = Path(__file__).resolve().parents[1] / "src"
# the `ray` command of this Python's environment (beside its interpreter), else the one on PATH
RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
# the nodes import this checkout's tokenmill; loopback only, so no token (a real cluster keeps Ray's token
# authentication: docs/scale.md); a node that stops answering is declared dead in about 2 s, not 30 s; the
# actors at the priority of the local engine's workers (Ray's default niceness is 15)
ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(SRC),
       "RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "1000",
       "RAY_health_check_failure_threshold": "3", "RAY_worker_niceness": "0"}
STARTED = re.compile(r"ray start --address='([^']+)'")
# a Ray process by its command line: a worker (its title ray::...), a node (`ray start`), its agents and monitors
RAY_PROCESS = re.compile(r"^ray::|/bin/ray start|/site-packages/ray/")


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
        for p in _family(self.process.pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                if p.name() == "raylet" and str(self.temp_dir) in " ".join(p.cmdline()):
                    return p
        return None

    def busy(self) -> bool:
        """Whether one of this node's workers is inside a unit (Ray titles it ``ray::UnitWorker.commit``) or a
        call of a unit that fans out (``ray::UnitWorker.call``) right now."""
        raylet = self.raylet()
        for p in raylet.children(recursive=True) if raylet else []:
            with contextlib.suppress(psutil.NoSuchProcess):
                if re.search(r"UnitWorker\.(commit|call)", " ".join(p.cmdline())):
                    return True
        return False

    def ran_units(self) -> bool:
        """Whether a unit worker ever ran on this node (its worker logs name the actor's class)."""
        return any("UnitWorker" in p.read_text(errors="replace") for p in self.temp_dir.glob("session_*/logs/worker-*"))

    def kill(self) -> None:
        """``ray start --block`` and everything it started, with SIGKILL: its descendants, then its process group
        for any that were re-parented."""
        family = _family(self.process.pid)
        for p in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        psutil.wait_procs(family, timeout=10)


def _family(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@dataclass
class Cluster:
    """Nodes of ``cpus`` CPUs each; ``env``: what every node's environment holds besides :data:`ENV`."""

    root: Path
    cpus: int = 1
    env: dict[str, str] = field(default_factory=dict)
    address: str = ""
    nodes: list[Node] = field(default_factory=list)

    def start(self, name: str, *, head: bool = False, timeout: float = 120) -> Node:
        """Starts ``ray start`` for the node and waits until its raylet runs (and, for the head, its address is
        known); RuntimeError where it does not come up."""
        if RAY is None:
            raise RuntimeError("no `ray` command beside this Python or on PATH")
        # Ray's socket paths (temp dir + session_<date>_<pid>/sockets/plasma_store) must fit in 107 bytes
        temp = Path(tempfile.mkdtemp(prefix=f"tmray-{name}-", dir="/tmp"))
        log = self.root / f"{name}.log"
        where = ["--head", "--port", str(free_port()), "--include-dashboard", "false"] if head else ["--address", self.address]
        cmd = [RAY, "start", *where, "--block", "--num-cpus", str(self.cpus), "--temp-dir", str(temp),
               "--node-ip-address", "127.0.0.1", "--resources", json.dumps({name: 1}), "--disable-usage-stats"]
        with log.open("w") as out:
            process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                       env={**os.environ, **ENV, **self.env})
        node = Node(name, temp, process, log)
        self.nodes.append(node)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            said = log.read_text(errors="replace")
            if head and (m := STARTED.search(said)):
                self.address = m.group(1)
            if (not head or self.address) and node.raylet() is not None and "Ray runtime started" in said:
                return node
            time.sleep(0.5)
        raise RuntimeError(f"`ray start` for {name} did not come up: {log.read_text(errors='replace')[-2000:]}")

    def alive(self) -> list[dict]:
        """The cluster's alive nodes and their resources, asked by a driver of its own."""
        probe = (f"import json, ray; ray.init(address={self.address!r}, log_to_driver=False); "
                 "print(json.dumps([n['Resources'] for n in ray.nodes() if n['Alive']]))")
        done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **ENV, **self.env},
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        return json.loads(done.stdout.strip().splitlines()[-1])

    def kill(self, *, keep_logs: bool = False) -> None:
        """Every node's processes, the worker nodes first; the temp dirs removed (with ``keep_logs``, the nodes'
        Ray logs copied first to ``root/<node>-logs``)."""
        for node in reversed(self.nodes):
            node.kill()
        for node in self.nodes:
            for logs in node.temp_dir.glob("session_2*/logs") if keep_logs else ():
                shutil.copytree(logs, self.root / f"{node.name}-logs", dirs_exist_ok=True)
            shutil.rmtree(node.temp_dir, ignore_errors=True)


def ray_processes(naming: tuple[str, ...] = ()) -> list[str]:
    """``pid user name command`` of every Ray process of the machine (``ps``): a raylet, a GCS server, a worker,
    a node's ``ray start``, an agent; with ``naming``, only those whose command line holds one of the strings
    (a node's temp dir)."""
    ps = subprocess.run(["ps", "-eo", "pid=,user=,comm=,args="], capture_output=True, text=True, check=True).stdout
    found = []
    for line in ps.splitlines():
        pid, user, comm, args = (line.split(None, 3) + ["", "", "", ""])[:4]
        if (comm in ("raylet", "gcs_server") or RAY_PROCESS.search(args)) and (
                not naming or any(n in args for n in naming)):
            found.append(f"{pid} {user} {comm} {args[:200]}")
    return found
