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


BAD_LINES = {  # what a hostile JSONL input holds besides its good records, and the reason each must get
    "malformed": (b'{"id": "bad-json", "text": "no closing quote}', "malformed_json"),
    "wrong_type": (None, "wrong_type"),  # the command's own field given a number (built per command)
    "invalid_utf8": (b'{"id": "bad-utf8", "text": "caf\xe9 au lait"}', "invalid_utf8"),
}
TRUNCATED = (b'{"id": "cut", "text": "the file ends in the mid', "malformed_json")  # the last line, cut


def hostile_jsonl(path: Path, good: list[dict], *, field: str) -> dict[int, str]:
    """``good`` records with a malformed line, ``field`` of the wrong type, an invalid UTF-8 line and a
    truncated last line mixed in; returns the expected reject reason by 1-based line."""
    lines = [json.dumps(r).encode() for r in good]
    expected: dict[int, str] = {}
    bad = [BAD_LINES["malformed"], (json.dumps({"id": "bad-type", field: 12345}).encode(), "wrong_type"),
           BAD_LINES["invalid_utf8"]]
    for k, (line, reason) in enumerate(bad):
        at = min(len(lines), 1 + 2 * k)
        lines.insert(at, line)
        expected = {(n + 1 if n > at else n): r for n, r in expected.items()}
        expected[at + 1] = reason
    lines.append(TRUNCATED[0])
    expected[len(lines)] = TRUNCATED[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines))  # no final newline: the file stops inside its last record
    return expected


def rejects_by_line(path: Path) -> dict[int, str]:
    """``{loc: reason}`` of a rejects file (``source`` checked by the caller)."""
    return {r["loc"]: r["reason"] for r in (json.loads(x) for x in Path(path).read_text().splitlines())}
