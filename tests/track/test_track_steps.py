"""Steps on the pretraining track: setup() once per worker, identity by name/version/params (never repr),
both step contracts (score/decide and plain callables), through the public ``run_pretrain`` path."""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import trackkit as tk

from tokenmill.curate.filters.heuristics.length import Length
from tokenmill.errors import ConfigError
from tokenmill.pretrain import run_pretrain
from tokenmill.shards import open_shards
from tokenmill.steps.contract import Scored, step_fingerprint


def make_plain_step():
    """A new function object on every call: its repr (and so the old fingerprint) holds a fresh address."""
    def drop_rivers(batch):
        keep = pc.invert(pc.match_substring(batch.column("text"), "river"))
        return batch.filter(keep), {"no_rivers:river": len(batch) - pc.sum(keep).as_py()}
    return drop_rivers


class Shout:
    """A plain class step without a dataclass repr: ``repr`` is ``<Shout object at 0x...>``."""

    name, version = "shout", 1

    def __init__(self, word: str = "boats"):
        self.word = word

    def __call__(self, batch):
        keep = pc.invert(pc.match_substring(batch.column("text"), self.word))
        return batch.filter(keep), {f"shout_v1:{self.word}": len(batch) - pc.sum(keep).as_py()}


@dataclass(frozen=True)
class CountingLength:
    """A score/decide step whose setup() builds unpicklable state and counts its calls in the run's extra."""

    name: str = "counting_length"
    version: int = 1
    min_words: int = 12
    _state: dict = field(default_factory=dict, repr=False, compare=False)

    def setup(self) -> None:
        self._state["setups"] = self._state.get("setups", 0) + 1
        self._state["lock"] = threading.Lock()  # cannot be pickled: setup must run after the task travels

    def score(self, batch: pa.RecordBatch) -> Scored:
        words = np.array([len(t.split()) for t in batch.column("text").to_pylist()])
        return Scored({"words": words}, counts=Counter({f"setups_seen:{self._state.get('setups', 0)}": 1}))

    def decide(self, scores):
        return np.where(scores["words"] < self.min_words, "too_few_words", None)  # named <step>_v<version>:<rule>


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("steps") / "docs.jsonl"
    tk.write_docs(path, 160, seed=4)
    return path


def run(corpus, out, steps, **kw):
    return run_pretrain([str(corpus)], out=out, steps=steps, unit_bytes=4000, progress=False, **kw)


def test_plain_function_and_recreated_steps_resume_instead_of_refusing(corpus, tmp_path):
    first = [make_plain_step(), Shout(), Length(min_chars=20)]
    m1 = run(corpus, tmp_path / "out", first, workers=1)
    again = [make_plain_step(), Shout(), Length(min_chars=20)]  # new objects, new reprs, same steps
    assert repr(again[0]) != repr(first[0]) and repr(again[1]) != repr(first[1])
    m2 = run(corpus, tmp_path / "out", again, workers=1)
    # a plain function's reason is put under its own name (drop_rivers_v1:), as every step's is, so the
    # ledger and the funnel can say which step removed what
    assert m2["counts"] == m1["counts"] and m1["counts"]["filtered"]["drop_rivers_v1:no_rivers:river"] > 0
    assert m1["config"]["steps"][1] == {"name": "shout", "version": 1, "params": {"word": "boats"}}
    with pytest.raises(ConfigError, match="other inputs or settings"):
        run(corpus, tmp_path / "out", [make_plain_step(), Shout("birds"), Length(min_chars=20)], workers=1)


def test_fingerprint_is_name_version_params():
    assert step_fingerprint(Shout()) == step_fingerprint(Shout())
    assert step_fingerprint(Shout()) != step_fingerprint(Shout("birds"))
    assert step_fingerprint(make_plain_step()) == step_fingerprint(make_plain_step())
    assert step_fingerprint(CountingLength()) != step_fingerprint(CountingLength(min_words=3))


@pytest.mark.parametrize("workers", [1, 2])
def test_setup_runs_once_per_worker_and_score_decide_steps_filter(corpus, tmp_path, workers):
    step = CountingLength()
    m = run(corpus, tmp_path / "out", [step], workers=workers)
    assert m["run"]["units"] > 4
    assert set(m["counts"]["extra"]) == {"setups_seen:1"}  # every batch saw exactly one setup in its worker
    n = m["counts"]["filtered"]["counting_length_v1:too_few_words"]
    assert 0 < n < 160 and m["counts"]["kept"] == 160 - n and m["counts"]["balanced"]
    shards = open_shards(tmp_path / "out")
    texts = {json.loads(line)["id"]: json.loads(line)["text"] for line in corpus.read_text().splitlines()}
    kept = [shards[i]["id"] for i in range(len(shards))]
    assert len(kept) == m["counts"]["kept"] and all(len(texts[k].split()) >= 12 for k in kept)
    assert "counting_length_v1" in m["run"]["step_seconds"] and "tokenize" in m["run"]["step_seconds"]
