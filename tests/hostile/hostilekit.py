"""Small inputs and runners shared by the hostile tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tokenmill.pretrain import run_pretrain


def docs(path: Path, n: int, *, start: int = 0, words: int = 12) -> Path:
    """A JSONL corpus of ``n`` small documents with ids ``doc-<start>``..."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"id": f"doc-{i}", "text": " ".join(f"word{i}x{k}" for k in range(words))}) + "\n"
                      for i in range(start, start + n))
    return path


def pretrain(inputs, out, **kw) -> dict:
    kw.setdefault("workers", 1)
    kw.setdefault("progress", False)
    return run_pretrain([str(p) for p in inputs], out=str(out), **kw)


def cli(*args: str, timeout: float = 120, **popen) -> subprocess.CompletedProcess:
    """``python -m tokenmill.cli ARGS`` as a real process; text output captured."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "tokenmill.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env, **popen)


def rejects(out: Path) -> list[dict]:
    path = Path(out) / "rejects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def reasons(out: Path) -> list[str]:
    return [r["reason"] for r in rejects(out)]
