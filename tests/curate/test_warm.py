"""Curation's workers start warm: the fork server imports the run's modules and loads the language
identifier, every worker it forks has it; a step that fails to warm, a broken hint or a fork server already
running only mean each worker loads its own, with the same output bytes."""

from __future__ import annotations

import base64
import hashlib
import json
import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("py3langid")

from curatekit import ENGLISH, OTHER  # noqa: E402

from tokenmill.curate.filters import language  # noqa: E402
from tokenmill.curate.filters.heuristics.gopher import GopherQuality  # noqa: E402
from tokenmill.curate.filters.language import Language  # noqa: E402
from tokenmill.engine import warm  # noqa: E402


@dataclass(frozen=True)
class FailsToWarm:
    name: str = "fails"
    version: int = 1

    def warm(self) -> None:
        raise RuntimeError("no model here")


def _named(payload: str) -> list:
    return pickle.loads(base64.b64decode(payload))


def test_preload_modules_are_the_tasks_then_tokenmills_step_modules_then_the_warmer():
    modules = warm.preload_modules([Language(), GopherQuality(), FailsToWarm(), Language()])
    assert modules[:len(warm.TASK_MODULES)] == warm.TASK_MODULES
    assert modules[len(warm.TASK_MODULES):] == ("tokenmill.curate.filters.language", "tokenmill.curate.filters.heuristics.gopher",
                                                warm.SERVER_MODULE)


def test_hint_names_tokenmills_steps_that_warm_and_restores_the_environment(monkeypatch):
    monkeypatch.setenv(warm.VARIABLE, "before")
    with warm.hint([GopherQuality(), Language(candidates=["en", "de"]), FailsToWarm()]):
        assert _named(os.environ[warm.VARIABLE]) == [Language(candidates=["en", "de"])]
    assert os.environ[warm.VARIABLE] == "before"
    monkeypatch.delenv(warm.VARIABLE)
    with warm.hint([GopherQuality(), FailsToWarm()]):  # nothing to warm: nothing named
        assert warm.VARIABLE not in os.environ
    assert warm.VARIABLE not in os.environ


def test_a_warmed_identifier_is_the_one_setup_uses(monkeypatch):
    monkeypatch.setattr(language, "_LOADED", {})
    monkeypatch.delenv(warm.VARIABLE, raising=False)
    with warm.hint([Language(candidates=["en", "fr"])]):
        payload = os.environ[warm.VARIABLE]
    monkeypatch.setenv(warm.VARIABLE, payload)
    assert warm.warm_from_environment() == ["language"]
    assert warm.VARIABLE not in os.environ  # not passed on to the processes the server forks
    (loaded,) = language._LOADED.values()

    def no_second_load(*args):
        raise AssertionError("setup loaded the identifier again")

    monkeypatch.setattr(language, "_load", no_second_load)
    step = pickle.loads(pickle.dumps(Language(candidates=["en", "fr"])))  # as a worker receives it
    step.setup()
    assert step._identifier is loaded


@pytest.mark.parametrize("payload", ["%%% not base64", base64.b64encode(b"not a pickle").decode(), ""])
def test_a_bad_hint_warms_nothing_and_never_raises(monkeypatch, payload):
    monkeypatch.setenv(warm.VARIABLE, payload)
    assert warm.warm_from_environment() == []


def test_a_step_that_fails_to_warm_leaves_the_others_warmed(monkeypatch):
    monkeypatch.setattr(language, "_LOADED", {})
    steps = [FailsToWarm(), Language(candidates=["en", "de"])]
    monkeypatch.setenv(warm.VARIABLE, base64.b64encode(pickle.dumps(steps)).decode())
    assert warm.warm_from_environment() == ["language"]
    assert list(language._LOADED) == [(None, ("en", "de"))]


SCRIPT = """
import base64, contextlib, json, os, pickle, sys
from collections import Counter
from dataclasses import dataclass

import numpy as np

from tokenmill.engine import warm
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.steps.contract import Scored


@dataclass(frozen=True)
class Probe:
    name: str = "probe"
    version: int = 1

    def setup(self):
        pass

    def score(self, batch):
        server = sys.modules.get("tokenmill.engine._warm_server")
        warmed = "language" in getattr(server, "WARMED", [])  # inherited from the fork server, or not
        return Scored({"seen": np.ones(batch.num_rows)}, counts=Counter({"batches": 1, "warm_batches": int(warmed)}))

    def decide(self, scores):
        return np.full(len(scores["seen"]), None, dtype=object)


@dataclass(frozen=True)
class FailsToWarm:
    name: str = "fails"

    def warm(self):
        raise RuntimeError("no model here")


@contextlib.contextmanager
def broken_hint(steps):
    os.environ[warm.VARIABLE] = base64.b64encode(pickle.dumps([FailsToWarm()])).decode()
    yield


if __name__ == "__main__":
    mode = sys.argv[3]
    if mode == "running":  # a fork server started before the run keeps its preload list
        from multiprocessing import forkserver
        forkserver.ensure_running()
    elif mode == "broken":
        warm.hint = broken_hint
    m = run_curate([sys.argv[1]], out=sys.argv[2], steps=[{"name": "language", "languages": ["en"]}, Probe()],
                   workers=2, unit_bytes=2048, progress=False, report=False)
    print(json.dumps(m["counts"]))
"""


@pytest.fixture(scope="module")
def warm_runs(tmp_path_factory):
    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork server on this platform: each worker loads its own identifier")
    root = tmp_path_factory.mktemp("warm")
    docs = root / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n"
                            for i, t in enumerate((ENGLISH + OTHER) * 6)))
    script = root / "run.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TOKENMILL_CACHE": str(root / "cache")}
    runs = {}
    for mode in ("warm", "running", "broken"):
        out = root / mode
        done = subprocess.run([sys.executable, str(script), str(docs), str(out), mode], capture_output=True,
                              text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[mode] = (json.loads(done.stdout.strip().splitlines()[-1]), out)
    return runs


def _tables(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for d in ("documents", "ledger") for p in sorted((out / d).glob("*.parquet"))}


def test_every_worker_starts_with_the_identifier_the_fork_server_loaded(warm_runs):
    counts, out = warm_runs["warm"]
    units = len(_tables(out)) // 2
    assert units > 2 and counts["extra"]["batches"] >= units
    assert counts["extra"]["warm_batches"] == counts["extra"]["batches"]


@pytest.mark.parametrize("mode", ["running", "broken"])
def test_workers_that_start_cold_load_their_own_and_write_the_same_bytes(warm_runs, mode):
    counts, out = warm_runs[mode]
    assert counts["extra"].get("warm_batches", 0) == 0 and counts["extra"]["batches"] > 2
    assert _tables(out) == _tables(warm_runs["warm"][1])
