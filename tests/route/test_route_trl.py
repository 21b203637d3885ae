"""TRL's dataset formats, each routed to its track and read: language modelling ``text``, conversational
``messages``, ``prompt``/``completion`` strings, and conversational ``prompt``/``completion`` lists."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))

from tokenmill import inspect
from tokenmill.pretrain import run_pretrain
from tokenmill.sft.run import run_sft
from tokenmill.shards import open_shards

N = 12


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def rows(kind: str) -> list[dict]:
    out = []
    for i in range(N):
        q, a = f"What is {i} plus {i}?", f"{i} plus {i} is {2 * i}."
        if kind == "language_modeling":
            out.append({"text": f"The number {i} doubled is {2 * i}, which every child learns at school. " * 3})
        elif kind == "conversational":
            out.append({"messages": [user(q), assistant(a)]})
        elif kind == "prompt_completion":
            out.append({"prompt": q, "completion": " " + a})
        else:  # conversational prompt/completion
            out.append({"prompt": [{"role": "system", "content": "Be exact."}, user(q)], "completion": [assistant(a)]})
    return out


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("kind, track", [("language_modeling", "pretrain"), ("conversational", "sft"),
                                         ("prompt_completion", "sft"), ("conversational_prompt_completion", "sft")])
def test_trl_formats_route_and_keep_every_record(tmp_path, kind, track):
    src = write(tmp_path / f"{kind}.jsonl", rows(kind))
    route = inspect([str(src)])[0]
    assert (route.kind, route.confidence) == (track, 1.0), route.to_dict()
    if track == "pretrain":
        manifest = run_pretrain([str(src)], out=tmp_path / "out", workers=1, progress=False)
    else:
        manifest = run_sft([str(src)], out=tmp_path / "out", workers=1, verify=0, progress=False)
    assert manifest["counts"]["kept"] == N and manifest["counts"]["rejected"] == {}, manifest["counts"]


def test_conversational_prompt_completion_trains_only_the_completion(tmp_path):
    src = write(tmp_path / "pc.jsonl", rows("conversational_prompt_completion"))
    run_sft([str(src)], out=tmp_path / "out", tokenizer="default", workers=1, verify=0, progress=False)
    from tokenmill.tokenize import load_tokenizer

    tok = load_tokenizer("default", fast=False)
    ds = open_shards(tmp_path / "out")
    doc = ds[3]
    trained = tok.decode(doc["input_ids"][doc["loss_mask"]].tolist())
    assert trained == "3 plus 3 is 6.<|im_end|>"
    assert "Be exact." in tok.decode(doc["input_ids"].tolist())
