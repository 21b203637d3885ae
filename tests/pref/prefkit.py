"""Small preference files for the pref tests, and the CLI as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from wordkit import WORDS


def text(i: int, n: int) -> str:
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(n))


def good_pair(i: int) -> dict:
    return {"prompt": [{"role": "user", "content": f"question {i}: {text(i, 6)}?"}],
            "chosen": [{"role": "assistant", "content": text(i + 1, 5 + i % 9)}],
            "rejected": [{"role": "assistant", "content": text(i + 2, 3 + i % 4)}]}


def write_pairs(path: Path, n: int, *, bad: bool = True) -> None:
    """``n`` good conversational pairs; with ``bad``, one of each kind of bad record among them."""
    lines = [json.dumps(good_pair(i)) for i in range(n)]
    if bad:
        same = good_pair(1)
        lines[2] = json.dumps({**same, "rejected": same["chosen"]})  # identical_completions
        lines[4] = json.dumps({**same, "rejected": [{"role": "assistant", "content": "  " + same["chosen"][0]["content"]
                                                     .replace(" ", "  ")}]})  # whitespace_only_difference
        lines[6] = json.dumps({**same, "chosen": [{"role": "assistant", "content": ""}]})  # empty_completion
        lines[8] = "{not json"  # malformed_json
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def cli(*args: str, cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenmill.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})
