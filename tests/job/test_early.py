"""The fork server started as a track command begins: only when the run will use a pool, and never a byte
of difference to what the run writes."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

from tokenmill.cli import build_parser
from tokenmill.job import early


def _docs(path, n, words=40):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": f"document {i} " + "word " * words}) + "\n" for i in range(n)))
    return path


def test_local_files_lists_a_few_inputs_by_name_and_size(tmp_path):
    for name in ("b.jsonl", "a.jsonl.gz", ".hidden.jsonl", "_skipped.jsonl"):
        _docs(tmp_path / "dir" / name, 3)
    _docs(tmp_path / "dir" / "sub" / "c.parquet", 3)
    found = early.local_files([str(tmp_path / "dir")])
    assert [(os.path.basename(f.path), f.format, f.compression) for f in found] == [
        ("a.jsonl.gz", "jsonl", "gzip"), ("b.jsonl", "jsonl", "")]
    assert all(f.size == os.path.getsize(f.path) for f in found)
    assert [os.path.basename(f.path) for f in early.local_files([str(tmp_path / "dir" / "*.jsonl")])] == ["b.jsonl"]
    one = early.local_files([str(tmp_path / "dir" / "b.jsonl")])
    assert len(one) == 1 and one[0].size == os.path.getsize(tmp_path / "dir" / "b.jsonl")


def test_a_saved_datasets_directory_is_one_input(tmp_path):
    from tokenmill.base.inputs import HF_DATASET_MARKERS

    saved = tmp_path / "saved"
    saved.mkdir()
    for marker in HF_DATASET_MARKERS:
        (saved / marker).write_text("{}")
    (saved / "data-00000-of-00001.arrow").write_bytes(b"x" * 10)
    [found] = early.local_files([str(saved)])
    assert found.path == str(saved)


@pytest.mark.parametrize("inputs", [["s3://bucket/docs.jsonl"], ["https://example.org/docs.jsonl"], ["missing.jsonl"],
                                    ["no-match-*.jsonl"]])
def test_inputs_that_are_not_local_files_start_nothing(tmp_path, inputs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert early.local_files(inputs) is None
    assert not early.start_fork_server("pretrain", inputs, workers=4, unit_bytes=None, tokenizer="default")


def test_one_worker_or_one_unit_starts_nothing(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr("multiprocessing.forkserver.ensure_running", lambda: started.append(1))
    small = _docs(tmp_path / "small.jsonl", 20)
    big = _docs(tmp_path / "big.jsonl", 400)
    assert not early.start_fork_server("pretrain", [str(small)], workers=4, unit_bytes=None, tokenizer="default")
    assert not early.start_fork_server("pretrain", [str(big), str(small)], workers=1, unit_bytes=None,
                                       tokenizer="default")
    assert started == []
    if "forkserver" in multiprocessing.get_all_start_methods():  # several units on several workers: started
        assert early.start_fork_server("sft", [str(big)], workers=2, unit_bytes=4096, tokenizer="default")
        assert started == [1]


SCRIPT = """
import sys
from tokenmill import cli

if sys.argv[1] == "late":
    cli._start_early = lambda track, args: None
from multiprocessing import forkserver
code = cli.main(sys.argv[2:])
print("early server:", forkserver._forkserver._forkserver_pid is not None, file=sys.stderr)
sys.exit(code)
"""


def _shard_bytes(out):
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name.startswith("shard-")}


def test_a_run_writes_the_same_bytes_with_and_without_the_early_server(tmp_path):
    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork server on this platform")
    inputs = [str(_docs(tmp_path / "in" / f"part-{i}.jsonl", 300)) for i in range(2)]
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT))
    outs = {}
    for mode in ("early", "late"):
        out = tmp_path / mode
        done = subprocess.run([sys.executable, str(script), mode, "pretrain", *inputs, "--out", str(out),
                               "--workers", "2", "--unit-bytes", "16KB", "--no-progress"],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert done.returncode == 0, done.stderr
        outs[mode] = _shard_bytes(out)
        assert outs[mode]
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["run"]["units"] >= 2 and manifest["counts"]["kept"] == 600
        assert f"early server: {mode == 'early'}" in done.stderr
    assert outs["early"] == outs["late"]


def test_the_parser_of_one_command_parses_it_as_the_whole_parser_does(tmp_path):
    argv = ["pretrain", "a.jsonl", "b.jsonl", "--out", "o", "--workers", "3", "--shard-tokens", "4096"]
    assert vars(build_parser("pretrain").parse_args(argv)) == vars(build_parser().parse_args(argv))
    argv = ["sft", "chats.jsonl", "--out", "o", "--tokenizer", "default"]
    assert vars(build_parser("sft").parse_args(argv)) == vars(build_parser().parse_args(argv))
    full = build_parser()
    assert set(build_parser("no-such-command")._subparsers._group_actions[0].choices) == \
        set(full._subparsers._group_actions[0].choices)


def test_a_library_run_starts_its_fork_server_before_it_lists_its_inputs(tmp_path, monkeypatch):
    """``job.run`` of a token track (every track's library entry) starts the fork server from the inputs' names and
    sizes, before listing and routing them, as the command line does; an executor that starts no workers ahead,
    nothing."""
    from tokenmill import track
    from tokenmill.engine import LocalExecutor
    from tokenmill.job import run as job_run
    from tokenmill.job.options import JobOptions
    from tokenmill.pretrain.run import pretrain_job

    calls = []
    monkeypatch.setattr(track, "start_fork_server", lambda *a, **k: calls.append(("server", k["workers"])) or False)
    real_plan = job_run.plan_inputs
    monkeypatch.setattr(job_run, "plan_inputs", lambda *a, **k: calls.append("plan") or real_plan(*a, **k))
    docs = [str(_docs(tmp_path / "in" / f"part-{i}.jsonl", 50)) for i in range(2)]
    options = JobOptions(dry_run=True)  # planned, configured, nothing written
    executor = LocalExecutor(workers=2)
    try:
        job_run.run(pretrain_job(), docs, out=tmp_path / "a", options=options, executor=executor)
    finally:
        executor.close()
    assert calls == [("server", executor.workers), "plan"]

    class Elsewhere:  # an executor without prepare (Ray, a user's own): the run starts its workers itself
        workers = 2

        def run(self, *a, **k):  # never reached: a dry run runs no stage
            raise AssertionError

    calls.clear()
    job_run.run(pretrain_job(), docs, out=tmp_path / "b", options=options, executor=Elsewhere())
    assert calls == ["plan"]
