"""Small corpora and comparisons shared by the track tests."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

DONE = Path("_state") / "shards_v1" / "done"  # commit journals of a track's one stage

WORDS = ("the river flows past old stone houses while children count boats and birds under a pale sky "
         "naïve café señor 東京 emoji 🚀 tabs\tand  double  spaces").split(" ")


def cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m tokenmill.cli ARGS`` as a real process; text output captured."""
    return subprocess.run([sys.executable, "-m", "tokenmill.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def popen(*args: str) -> subprocess.Popen:
    """The CLI started in its own process group (so a kill reaches its workers too)."""
    return subprocess.Popen([sys.executable, "-m", "tokenmill.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def doc_text(rng: random.Random, lo: int = 5, hi: int = 60) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def write_docs(path: Path, n: int, *, seed: int = 0, broken_every: int = 0) -> list[str]:
    """A JSONL document corpus; every ``broken_every``-th line is malformed JSON. Returns the good texts."""
    rng = random.Random(seed)
    texts = []
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            text = doc_text(rng)
            texts.append(text)
            f.write(json.dumps({"id": f"doc-{i}", "text": text}, ensure_ascii=False) + "\n")
            if broken_every and i % broken_every == broken_every - 1:
                f.write('{"id": "broken", "text": "unterminated\n')
    return texts


def chat(*turns: tuple[str, str], **extra) -> dict:
    return {"messages": [{"role": r, "content": c} for r, c in turns], **extra}


def write_chats(path: Path, n: int, *, seed: int = 0, broken_every: int = 0) -> list[dict]:
    """A JSONL file of OpenAI-style conversations (some with a system turn and two exchanges)."""
    rng = random.Random(seed)
    rows = []
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            turns = [("system", "Be brief.")] if i % 3 == 0 else []
            turns += [("user", doc_text(rng, 3, 15) + "?"), ("assistant", doc_text(rng, 3, 30))]
            if i % 4 == 1:
                turns += [("user", "And then?"), ("assistant", doc_text(rng, 2, 10))]
            row = chat(*turns, id=f"conv-{i}")
            rows.append(row)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            if broken_every and i % broken_every == broken_every - 1:
                f.write("[not, json\n")
    return rows


def output_files(out: Path) -> dict[str, bytes]:
    """Every file of an output directory outside ``_state/``, except ``manifest.json``, by relative path."""
    files = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out)
        if p.is_file() and rel.parts[0] != "_state" and rel.name != "manifest.json":
            files[str(rel)] = p.read_bytes()
    return files


def manifest_without_run(out: Path) -> dict:
    m = json.loads((out / "manifest.json").read_text())
    m.pop("run")
    return m


def assert_same_output(a: Path, b: Path) -> None:
    """Byte-identical shards and rejects, and equal manifests apart from their timings."""
    fa, fb = output_files(a), output_files(b)
    assert sorted(fa) == sorted(fb)
    differing = [name for name in fa if fa[name] != fb[name]]
    assert not differing, f"files differ between {a} and {b}: {differing[:5]}"
    assert manifest_without_run(a) == manifest_without_run(b)


def read_rejects(out: Path) -> list[dict]:
    path = out / "rejects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
