"""``--engine ray`` prints tokenmill's output, not Ray's token-authentication banner (unless asked for)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "track"))
import trackkit as tk  # noqa: E402

BANNER = "Token authentication is enabled"


def _run(tmp_path: Path, name: str, **env: str) -> subprocess.CompletedProcess:
    src = tmp_path / "docs.jsonl"
    if not src.exists():
        tk.write_docs(src, 10)
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    environ.pop("RAY_AUTH_MODE", None)
    environ.pop("RAY_ADDRESS", None)
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "tokenmill.cli", "pretrain", str(src), "--out", str(tmp_path / name),
                           "--engine", "ray", "--workers", "1", "--no-progress", "--tokenizer", "default"],
                          capture_output=True, text=True, timeout=240, env=environ)


def test_engine_ray_starts_without_the_authentication_banner(tmp_path):
    quiet = _run(tmp_path, "quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert BANNER not in quiet.stderr + quiet.stdout, quiet.stderr


def test_rays_notices_while_it_joins_a_cluster_are_kept_off_unless_asked(monkeypatch):
    """Any of Ray's log lines below an error during ``ray.init`` (e.g. ``--ray-address auto`` naming which of
    several clusters it joined), not only the authentication banner; ``TOKENMILL_RAY_VERBOSE=1`` shows them."""
    import logging

    from tokenmill.engine.ray import VERBOSE_ENV, _quiet_ray_start

    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    ray_logger = logging.getLogger("ray")  # every notice of Ray's passes its handlers (the suite may have set it up)
    handler, level = Keep(logging.DEBUG), ray_logger.level
    ray_logger.addHandler(handler)
    try:
        monkeypatch.delenv(VERBOSE_ENV, raising=False)
        with _quiet_ray_start():
            logging.getLogger("ray._private.services").warning("Found multiple active Ray instances")
            logging.getLogger("ray._private.authentication.authentication_token_setup").warning(BANNER)
        assert seen == []
        assert ray_logger.level == level  # Ray's own levels are left as they were
        monkeypatch.setenv(VERBOSE_ENV, "1")
        with _quiet_ray_start():
            logging.getLogger("ray._private.services").warning("Found multiple active Ray instances")
        assert seen == ["Found multiple active Ray instances"]
    finally:
        ray_logger.removeHandler(handler)


def test_a_run_joining_a_started_cluster_prints_only_tokenmills_lines(ray_cluster, tmp_path):
    """``--ray-address`` to a cluster already running (the suite's): stdout and stderr hold tokenmill's summary
    and nothing of Ray's (no log line, no worker output), and the shards are the local engine's."""
    import re

    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 10)
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    environ.pop("RAY_ADDRESS", None)
    runs = {}
    for name, extra in (("local", []), ("joined", ["--engine", "ray", "--ray-address", ray_cluster])):
        runs[name] = subprocess.run([sys.executable, "-m", "tokenmill.cli", "pretrain", str(src), "--out",
                                     str(tmp_path / name), "--workers", "1", "--no-progress", "--tokenizer", "default",
                                     *extra], capture_output=True, text=True, timeout=240, env=environ)
        assert runs[name].returncode == 0, runs[name].stderr
    ray_log = re.compile(r"^(\[?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\(\w+ pid=\d+\))|\bray\b|Ray cluster", re.I)
    printed = (runs["joined"].stdout + runs["joined"].stderr).splitlines()
    assert not [ln for ln in printed if ray_log.search(ln)], printed
    assert runs["joined"].stderr == runs["local"].stderr == ""
    assert runs["joined"].stdout == runs["local"].stdout.replace(str(tmp_path / "local"), str(tmp_path / "joined"))
    shards = sorted((tmp_path / "local").glob("shard-*"))
    assert shards and all((tmp_path / "joined" / p.name).read_bytes() == p.read_bytes() for p in shards)



def test_engine_ray_without_an_address_starts_its_own_cluster_beside_a_running_one(tmp_path):
    """A cluster started with ``ray start`` runs on this machine: ``--engine ray`` without ``--ray-address``
    starts a cluster of its own with its worker count, instead of trying to join that one with a CPU count
    (which Ray refuses: "When connecting to an existing cluster, num_cpus and num_gpus must not be provided")."""
    import shutil
    import signal
    import time

    ray_cli = shutil.which("ray", path=os.path.dirname(sys.executable))
    if ray_cli is None:
        pytest.skip("the ray command is not installed beside this interpreter")
    current = Path(os.environ.get("TMPDIR", "/tmp")) / "ray" / "ray_current_cluster"
    before = current.read_bytes() if current.exists() else None
    head = subprocess.Popen([ray_cli, "start", "--head", "--num-cpus", "1", "--include-dashboard=false", "--block",
                             "--port", "0", "--disable-usage-stats"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while (not current.exists() or current.read_bytes() == before) and time.monotonic() < deadline:
            time.sleep(0.5)
        if not current.exists() or current.read_bytes() == before:
            pytest.skip("ray start did not bring a cluster up here")
        done = _run(tmp_path, "beside")
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # this cluster's processes only (``ray stop`` would stop every one)
        head.wait(timeout=60)
        if before is None:
            current.unlink(missing_ok=True)
        else:
            current.write_bytes(before)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "beside" / "manifest.json").exists()
