"""Small inputs and runners shared by the hostile tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tokenmill.pretrain import run_pretrain
from wordkit import RECIPE, SHOP, WORDS


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


# ---- every command that writes, on small inputs (test_hostile_every_writer.py) ---------------------------------

JOB_FLAGS = ["--workers", "1", "--unit-bytes", "4000", "--no-progress"]  # several work units per input
# a real `tokenmill` process stopped before argv[1] (module:attribute) is called, after printing "paused", until
# its stdin closes (a run holding its --out, for the checks of a second run)
PAUSED = """
import importlib, sys
module, name = sys.argv[1].split(":")
mod = importlib.import_module(module)
real = getattr(mod, name)
def paused(*args, **kwargs):
    print("paused", flush=True)
    sys.stdin.read()
    return real(*args, **kwargs)
setattr(mod, name, paused)
from tokenmill.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _lines(path: Path, rows: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _texts(path: Path, words: list[str], n: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    return _lines(path, [{"id": f"d{i}", "text": " ".join(rng.choice(words) for _ in range(rng.randrange(110, 200)))}
                         for i in range(n)])


def _chats(path: Path, n: int) -> str:
    return _lines(path, [{"messages": [{"role": "user", "content": f"Question {i}: how far is the river from hill {i}?"},
                                       {"role": "assistant", "content": f"It is {i} kilometres away, past the mill."}]}
                         for i in range(n)])


def _pairs(path: Path, n: int) -> str:
    def text(i: int, k: int) -> str:
        return " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(k))

    return _lines(path, [{"prompt": [{"role": "user", "content": f"question {i}: {text(i, 6)}?"}],
                          "chosen": [{"role": "assistant", "content": text(i + 1, 5 + i % 9)}],
                          "rejected": [{"role": "assistant", "content": text(i + 2, 3 + i % 4)}]} for i in range(n)])


def shards(tmp: Path) -> Path:
    """A pretrain output of 30 documents (what export, plan and card read)."""
    out = tmp / "shards"
    if not out.is_dir():
        pretrain([docs(tmp / "shards-in" / "docs.jsonl", 30)], out, tokenizer="default")
    return out


def _evals(tmp: Path) -> str:
    path = tmp / "evals.jsonl"
    path.write_text(json.dumps({"question": " ".join(WORDS[:9]), "answer": "x"}) + "\n")
    return str(path)


def _recipe(tmp: Path) -> str:
    shards(tmp)
    (tmp / "recipe.yaml").write_text(RECIPE)
    return str(tmp / "recipe.yaml")


NO_SERVER = "http://127.0.0.1:9"  # nothing listens there: synth's refusals and dry run come before any request
# the server and model synth's runs ask: a test that runs it sets both (test_hostile_every_writer's synth_server)
SYNTH = {"server": NO_SERVER, "model": "m"}
# command -> (its words, what it reads and its options; built in a temporary folder): ``--out`` is added after
WRITERS = {
    "pretrain": lambda t: ["pretrain", _texts(t / "in" / "docs.jsonl", WORDS, 40, 1), "--tokenizer", "default",
                           *JOB_FLAGS],
    "sft": lambda t: ["sft", _chats(t / "in" / "chats.jsonl", 40), "--tokenizer", "default", *JOB_FLAGS],
    "curate": lambda t: ["curate", _texts(t / "in" / "docs.jsonl", WORDS, 40, 1), "--preset", "none", *JOB_FLAGS],
    "decontaminate": lambda t: ["decontaminate", _texts(t / "in" / "docs.jsonl", WORDS, 40, 8), *JOB_FLAGS,
                                "--eval", _evals(t)],
    "select": lambda t: ["select", "--target", _texts(t / "in" / "ref.jsonl", WORDS, 20, 2), "--from",
                         _texts(t / "in" / "a.jsonl", WORDS, 30, 3), _texts(t / "in" / "b.jsonl", SHOP, 30, 4),
                         "--n", "20", *JOB_FLAGS],
    "sft select": lambda t: ["sft", "select", _chats(t / "in" / "chats.jsonl", 30), "--n", "5", *JOB_FLAGS],
    "synth": lambda t: ["synth", "rephrase", _texts(t / "in" / "docs.jsonl", WORDS, 12, 1), "--server",
                        SYNTH["server"], "--model", SYNTH["model"], "--unit-bytes", "4000", "--no-progress",
                        "--concurrency", "1", "--max-tokens", "32", "--retries", "1",
                        "--cache-dir", str(t / "synth-cache")],
    "pref": lambda t: ["pref", _pairs(t / "in" / "pairs.jsonl", 40), "--tokenizer", "default", *JOB_FLAGS],
    "lm train": lambda t: ["lm", "train", "--text", _texts(t / "in" / "docs.jsonl", WORDS, 60, 5), "--order", "3",
                           *JOB_FLAGS],
    "quality train": lambda t: ["quality", "train", "--positive", _texts(t / "in" / "pos.jsonl", WORDS, 40, 6),
                                "--negative", _texts(t / "in" / "neg.jsonl", SHOP, 40, 7), "--param", "quantize=0",
                                *JOB_FLAGS],
    "export bin": lambda t: ["export", str(shards(t)), "--to", "bin", "--seq-len", "8"],
    "export hf": lambda t: ["export", str(shards(t)), "--to", "hf"],
    "plan": lambda t: ["plan", _recipe(t)],
    "demo": lambda t: ["demo"],
    "card": lambda t: ["card"],  # its DIR is a finished run: the command's --out
}
NEEDS = {"quality train": "fasttext", "export hf": "datasets", "demo": "torch"}  # the extra a command needs


def writer_argv(command: str, tmp: Path, out: Path, *extra: str) -> list[str]:
    """``tokenmill COMMAND`` over small inputs made in ``tmp``, writing ``out`` (``card``: the run it writes
    into), with the flags ``extra`` put right after the command's words (before an option that takes a list)."""
    argv = WRITERS[command](tmp)
    words = 2 if command in ("sft select", "lm train", "quality train", "synth") else 1
    where = [str(out)] if command == "card" else ["--out", str(out)]
    return [*argv[:words], *extra, *where, *argv[words:]]
