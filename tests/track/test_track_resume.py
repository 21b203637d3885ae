"""kill -9 in the middle of a run, start it again: the same bytes as a run never interrupted."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import trackkit as tk

import statekit
from tokenmill.cli import main

N_DOCS = 1400  # ~300 KB of JSONL; with 2 KB units, about 150 work units


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("resume") / "corpus.jsonl"
    tk.write_docs(path, N_DOCS, seed=7, broken_every=97)
    return path


def run_args(corpus: Path, out: Path, workers: int) -> list[str]:
    return ["pretrain", str(corpus), "--out", str(out), "--workers", str(workers), "--unit-bytes", "2KB",
            "--no-progress"]


def kill_after_commits(args: list[str], done_dir: Path, *, at_least: int) -> int:
    """Start the CLI, ``kill -9`` its main process once ``at_least`` units committed; return how many had.

    The workers are not signalled: they must notice on their own that the run died and stop.
    """
    proc = tk.popen(*args)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if statekit.count(done_dir) >= at_least:
                break
            time.sleep(0.005)
        assert proc.poll() is None, "the run finished before it could be killed; make the units smaller"
        proc.kill()
        proc.wait(timeout=30)
        assert group_gone(proc.pid, within=10), "worker processes outlived the killed run"
    finally:
        if not group_gone(proc.pid, within=0):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()
        proc.stderr.close()
    return statekit.count(done_dir)


def group_gone(pgid: int, *, within: float) -> bool:
    deadline = time.monotonic() + within
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference") / "out"
    assert main(run_args(corpus, out, 1)) == 0
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_and_resume_gives_the_same_bytes(corpus, reference, tmp_path, workers):
    out = tmp_path / "out"
    args = run_args(corpus, out, workers)
    committed = kill_after_commits(args, out / tk.DONE, at_least=20)
    total_units = len(statekit.committed(reference, "shards_v1"))
    assert total_units >= 100
    assert 20 <= committed < total_units
    assert not (out / "manifest.json").exists()

    done = tk.cli(*args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert len(statekit.committed(out, "shards_v1")) == total_units
    tk.assert_same_output(reference, out)
    assert tk.manifest_without_run(out)["counts"]["balanced"]


def test_resume_after_completion_does_no_work_and_changes_nothing(corpus, reference):
    before = {p: p.stat().st_mtime_ns for p in reference.glob("shard-*")}
    files = tk.output_files(reference)
    manifest = tk.manifest_without_run(reference)
    assert main(run_args(corpus, reference, 1)) == 0
    assert {p: p.stat().st_mtime_ns for p in reference.glob("shard-*")} == before
    assert tk.output_files(reference) == files and tk.manifest_without_run(reference) == manifest


def test_resume_with_other_settings_is_refused(tmp_path, capsys):
    corpus = tmp_path / "small.jsonl"
    tk.write_docs(corpus, 50)
    out = tmp_path / "out"
    assert main(run_args(corpus, out, 1)) == 0
    args = run_args(corpus, out, 1)
    args[args.index("2KB")] = "1KB"
    assert main(args) == 1  # a configuration error (exit statuses: README)
    err = capsys.readouterr().err
    assert "other inputs or settings" in err and "--overwrite" in err
    assert main(args + ["--overwrite"]) == 0
