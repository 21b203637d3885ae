"""The fast encoder built once by the fork server (engine/warm.py), found by every process it forks."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tokenmill.engine import warm, workers
from tokenmill.tokenize import backends
from tokenmill.tokenize.sources import resolve
from tokenmill.tokenize.tokenizer import load_tokenizer


def test_hint_names_local_specs_only_and_restores_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(warm.ENCODER_VARIABLE, raising=False)
    with warm.encoder_hint("default"):
        assert os.environ[warm.ENCODER_VARIABLE] == "default"
    assert warm.ENCODER_VARIABLE not in os.environ
    monkeypatch.setenv(warm.ENCODER_VARIABLE, "before")
    with warm.encoder_hint(tmp_path):
        assert os.environ[warm.ENCODER_VARIABLE] == str(tmp_path)
    assert os.environ[warm.ENCODER_VARIABLE] == "before"
    for spec in ("org/some-hub-model", tmp_path / "missing", object()):
        with warm.encoder_hint(spec):
            assert os.environ[warm.ENCODER_VARIABLE] == "before"


def test_a_prebuilt_encoder_is_the_one_a_shipped_tokenizer_encodes_with(monkeypatch):
    monkeypatch.setattr(backends, "PREBUILT", {})
    monkeypatch.setenv(warm.ENCODER_VARIABLE, "default")
    assert warm.build_encoder()
    assert warm.ENCODER_VARIABLE not in os.environ  # not passed on to the processes the server forks
    key = backends.source_key(resolve("default"))
    assert list(backends.PREBUILT) == [key]
    shipped = pickle.loads(pickle.dumps(load_tokenizer("default")))  # as a worker receives it: no encoders
    assert shipped._fast_encoder is backends.PREBUILT[key]
    assert shipped.encode("hello world") == load_tokenizer("default").encode("hello world")



def test_a_shipped_tokenizer_reads_the_cached_token_lengths_and_encodes_as_a_fresh_load(monkeypatch, tmp_path):
    """A worker's piecewise encoder takes its token byte lengths from the cache beside the encoder's JSON (no
    vocabulary read of its own once a process has measured them) and encodes rendered chats as a fresh load does."""
    from test_tokenizer import train_dir

    from tokenmill.tokenize import pieces

    d = train_dir(tmp_path / "tok")
    fresh = load_tokenizer(d)
    want = pieces.byte_lengths(fresh._fast_encoder.vocab).tolist()
    assert fresh._piece_lengths().tolist() == want  # measured, and written to the cache
    shipped = pickle.loads(pickle.dumps(fresh))

    def no_measure(vocab):
        raise AssertionError("the worker reads the cached table")

    monkeypatch.setattr(pieces, "byte_lengths", no_measure)
    assert shipped._piece_lengths().tolist() == want
    text = "<|im_start|>user\nHi ünï 🎉<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
    for got, want_col in zip(shipped.encode_rendered_batch([text], [[]])[0], fresh.encode_pieces(
            text, fresh.control_spans(text)[0])):
        assert got.tolist() == want_col.tolist()


def test_a_bad_named_tokenizer_is_left_to_the_run(monkeypatch, tmp_path):
    monkeypatch.setattr(backends, "PREBUILT", {})
    (tmp_path / "tokenizer.json").write_text("{not json")
    monkeypatch.setenv(warm.ENCODER_VARIABLE, str(tmp_path))
    assert not warm.build_encoder()  # never raises
    assert backends.PREBUILT == {}


SCRIPT = """
import json, sys
from tokenmill.pretrain import run_pretrain


def probe(batch):
    from tokenmill.tokenize import backends
    return batch, {"prebuilt": len(getattr(backends, "PREBUILT", {}))}  # removes nothing: counts.extra


if __name__ == "__main__":
    m = run_pretrain([sys.argv[1]], out=sys.argv[2], tokenizer="default", workers=2, unit_bytes=2048,
                     progress=False, steps=[probe])
    print(json.dumps(m["counts"]))
"""


def test_pool_workers_start_with_the_encoder_the_fork_server_built(tmp_path):
    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork server on this platform: each worker builds its own encoder")
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": f"document {i}"}) + "\n" for i in range(400)))
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "docs.jsonl"), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    units = len(list(Path(tmp_path / "out").glob("shard-*.json")))
    assert counts["kept"] == 400 and units > 2
    assert counts["extra"].get("prebuilt", 0) >= units  # every batch of every unit saw the server's encoder


def test_token_byte_lengths_are_cached_by_the_source_and_a_wrong_size_table_is_measured_again(
        monkeypatch, tmp_path):
    from test_tokenizer import train_dir

    from tokenmill.tokenize import pieces

    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "cache"))
    source = resolve(train_dir(tmp_path / "tok"))
    fast = backends.fast_for(source)
    want = pieces.byte_lengths(fast.vocab).tolist()
    assert backends.token_byte_lengths(source, fast).tolist() == want  # measured and written
    [cached] = (tmp_path / "cache" / "encoders").glob("*.lengths")

    def no_measure(vocab):
        raise AssertionError("a cached table is read, not measured")

    with monkeypatch.context() as m:
        m.setattr(pieces, "byte_lengths", no_measure)
        assert backends.token_byte_lengths(source, fast).tolist() == want
    cached.write_bytes(cached.read_bytes()[:-8])  # one token short: not this encoder's table
    assert backends.token_byte_lengths(source, fast).tolist() == want
    assert len(cached.read_bytes()) == 8 * fast.vocab_size  # written again


def test_the_server_imports_the_modules_named_before_it_started_and_passes_none_on(monkeypatch):
    """Every caller's modules reach the one server module (engine/_server.py), in order, once; a module that
    fails to import is left to the workers; the list is not passed on to the processes the server forks."""
    monkeypatch.delenv(warm.MODULES_VARIABLE, raising=False)
    warm.preload_in_forkserver(["json", "tokenmill_no_such_module"])
    warm.preload_in_forkserver(["json", "csv"])
    assert os.environ[warm.MODULES_VARIABLE] == "json,tokenmill_no_such_module,csv"
    assert warm.import_modules() == ["json", "csv"]
    assert warm.MODULES_VARIABLE not in os.environ
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver

        assert forkserver._forkserver._preload_modules[0] == workers.SERVER_MODULE  # the server's first import


def test_the_server_module_does_nothing_outside_a_fork_server(monkeypatch):
    """A process that imports every module of the engine (not a fork server) neither imports the modules named
    to a server nor freezes or guards itself."""
    monkeypatch.setenv(warm.MODULES_VARIABLE, "tokenmill_no_such_module")
    assert warm.serve() == {}
    assert os.environ[warm.MODULES_VARIABLE] == "tokenmill_no_such_module"  # left for the server
