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
