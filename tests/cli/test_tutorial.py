"""docs/tutorial.md runs as written, from top to bottom, on the real files of ../shared/data."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
BLOCK = re.compile(r"```(sh|python)\n(.*?)```", re.S)
PRELUDE = 'tokenmill() { "$PY" -m tokenmill.cli "$@"; }\npython() { "$PY" "$@"; }\n'


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(TUTORIAL.read_text(encoding="utf-8"))


def test_the_tutorial_covers_the_walk_through():
    text = "\n".join(body for _, body in blocks())
    for step in ("tokenmill inspect", "tokenmill pretrain", "tokenmill sft", "tokenmill audit", "tokenmill stats",
                 "BlendedDataset", "python train.py", "tokenmill plan recipe.yaml --out", "PackedLoader.from_recipe",
                 "tokenmill plan recipe.yaml --check", "tokenmill export"):
        assert step in text, step


def test_the_tutorial_runs(shared_data, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    repo = tmp_path / "repo"  # the reader starts in the repository root, and the tutorial leaves nothing there
    repo.mkdir()
    cwd, where = repo, tmp_path / "cwd"  # one shell for the reader: a block's `cd` holds for the next ones
    env = {**os.environ, "PY": sys.executable, "DATA": str(shared_data), "TOKENMILL_PROGRESS_EVERY": "3600"}
    outputs = []
    for kind, body in blocks():
        body = body.replace("../shared/data", str(shared_data))
        if kind == "python":
            name = body.splitlines()[0].removeprefix("# ").strip()
            (cwd / name).write_text(body)
            continue
        done = subprocess.run(["bash", "-e", "-c", PRELUDE + body + f'\npwd > "{where}"'], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{body}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        outputs.append(done.stdout)
        cwd = Path(where.read_text().strip())
    assert list(repo.iterdir()) == [], "the tutorial wrote into the repository root"
    printed = "\n".join(outputs)
    web = json.loads((cwd / "shards" / "web" / "manifest.json").read_text())
    chat = json.loads((cwd / "shards" / "chat" / "manifest.json").read_text())
    assert web["counts"]["kept"] == 600 and web["tokenizer"]["name"] == "qwen2"
    assert web["config"]["eos"]["token"] == "<|endoftext|>"  # the instruct tokenizer's <|im_end|> ends no document
    assert chat["counts"]["kept"] > 150 and chat["report"]["parity"]["checked"] > 0
    assert [s["kind"] for s in chat["config"]["skipped_inputs"]] == ["preference"]
    assert "dry run:" in printed and "[[" in printed and "packing" in printed.lower()
    losses = [float(m) for m in re.findall(r"step \d+: loss ([\d.]+)", printed)]
    assert len(losses) == 8 and losses[-1] < losses[0]
    plan = json.loads((cwd / "plan" / "plan.json").read_text())
    assert [p["name"] for p in plan["phases"]] == ["stable", "decay", "long"]
    assert len(plan["warnings"]) == 1 and plan["warnings"][0].startswith("source 'chat': ")  # its longest examples
    assert "longer than the window of 256 tokens" in plan["warnings"][0]
    assert plan["phases"][1]["tokens"]["chat"] > 0 and plan["phases"][2]["seq_len"] == 512
    recipe_losses = re.findall(r"step \d+ \((\w+), (\d+) tokens a row\): loss ([\d.]+)", printed)
    assert [p for p, _, _ in recipe_losses] == ["stable"] * 6 + ["decay"] * 4 + ["long"] * 2
    assert "OK: the run consumed what the plan says" in printed
    assert "token dtype: uint32" in printed and (cwd / "chat-hf" / "dataset_info.json").exists()
