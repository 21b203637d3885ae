"""Outputs on object storage: both tracks into ``s3://`` on a real S3-compatible server (moto in server mode,
started here on a free port; s3fs talks HTTP to it, nothing is mocked), compared byte for byte with a local
run; a run killed midway resumes from the bucket's markers, even with a new work directory."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
import uuid
from pathlib import Path

import pytest
import trackkit as tk

moto_server = pytest.importorskip("moto.moto_server.threaded_moto_server", reason="moto[server] is not installed")
s3fs = pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'tokenmill[s3]')")

from tokenmill.cli import main  # noqa: E402
from tokenmill.engine.store import RemoteOutput  # noqa: E402
from tokenmill.errors import ConfigError, StorageError  # noqa: E402
from tokenmill.pretrain import run_pretrain  # noqa: E402
from tokenmill.sft.run import run_sft  # noqa: E402
from tokenmill.shards import open_shards  # noqa: E402

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
# what a finished run leaves under _state/ in the bucket: fingerprint, input snapshot, the stage's index (its
# unit markers are gone once it has ended), per-unit rejects
STATE_KEYS = re.compile(r"_state/(shards_v1/(run|inputs)\.json|shards_v1/index\.jsonl|rejects/[^/]+\.jsonl)")


@pytest.fixture(scope="module")
def endpoint():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(endpoint):
    """(filesystem, options, bucket): a fresh bucket on the local server."""
    options = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    bucket = f"tm-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    return fs, options, bucket


def objects(fs, prefix: str) -> dict[str, bytes]:
    """Every object below ``prefix``, by key relative to it."""
    fs.invalidate_cache()
    return {key[len(prefix) + 1:]: fs.cat_file(key) for key in sorted(fs.find(prefix))}


def assert_same_as_local(remote: dict[str, bytes], local: Path) -> None:
    """The bucket holds the local run's files byte for byte (the manifest apart from its timings), and
    nothing else but the run's state: no temporary key, no lock."""
    outputs = {k: v for k, v in remote.items() if not k.startswith("_state/") and k != "manifest.json"}
    expected = tk.output_files(local)
    assert sorted(outputs) == sorted(expected) and any(k.endswith(".ids") for k in outputs)
    assert [k for k in outputs if outputs[k] != expected[k]] == []
    manifest = json.loads(remote["manifest.json"])
    manifest.pop("run")
    assert manifest == tk.manifest_without_run(local)
    strays = [k for k in remote if k.startswith("_state/") and not STATE_KEYS.fullmatch(k)]
    assert strays == [], f"keys a finished run should not leave: {strays}"
    assert not [k for k in remote if ".tmp" in k]


def test_pretrain_into_s3_gives_the_local_bytes_and_reads_back(s3, endpoint, tmp_path, monkeypatch):
    fs, options, bucket = s3
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 300, broken_every=41)
    common = {"tokenizer": "default", "workers": 2, "unit_bytes": 4096, "shard_tokens": 2000, "progress": False}
    run_pretrain([str(src)], out=tmp_path / "local", **common)
    work = tmp_path / "work"
    url = f"s3://{bucket}/runs/web"
    manifest = run_pretrain([str(src)], out=RemoteOutput(url, storage_options=options, work_dir=work), **common)

    remote = objects(fs, f"{bucket}/runs/web")
    assert_same_as_local(remote, tmp_path / "local")
    assert "rejects.jsonl" in remote and json.loads(remote["manifest.json"])["counts"] == manifest["counts"]
    left = [str(p.relative_to(work)) for p in work.rglob("*") if p.is_file()]
    assert left and all(p.startswith("_state/") for p in left), left  # the outputs live in the bucket only

    again = run_pretrain([str(src)], out=RemoteOutput(url, storage_options=options, work_dir=work), **common)
    assert again["counts"] == manifest["counts"]  # a finished run resumed: nothing redone, the same objects
    assert_same_as_local(objects(fs, f"{bucket}/runs/web"), tmp_path / "local")

    for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}.items():  # as a user's shell sets them
        monkeypatch.setenv(name, value)
    remote, local = open_shards(url), open_shards(tmp_path / "local")
    assert (remote.n_docs, remote.n_tokens) == (local.n_docs, local.n_tokens) > (0, 0)
    assert list(remote[remote.n_docs - 1]["input_ids"]) == list(local[local.n_docs - 1]["input_ids"])
    assert main(["audit", url, "--n", "1", "--json"]) == 0


def test_sft_into_s3_with_the_packing_report(s3, tmp_path):
    fs, options, bucket = s3
    src = tmp_path / "chats.jsonl"
    tk.write_chats(src, 80, broken_every=13)
    common = {"tokenizer": "default", "workers": 1, "verify": 0, "unit_bytes": 4096, "seq_len": 256,
              "progress": False}
    run_sft([str(src)], out=tmp_path / "local", **common)
    url = f"s3://{bucket}/chat"
    manifest = run_sft([str(src)], out=RemoteOutput(url, storage_options=options, work_dir=tmp_path / "w"), **common)
    assert manifest["report"]["packing"]["n_packs"] > 0
    assert_same_as_local(objects(fs, f"{bucket}/chat"), tmp_path / "local")


def cli_env(endpoint: str, cache: Path) -> dict[str, str]:
    return {**os.environ, **CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "TOKENMILL_CACHE": str(cache)}


def test_cli_killed_midway_resumes_from_the_bucket_with_a_new_work_dir(s3, endpoint, tmp_path):
    fs, _, bucket = s3
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 300)
    flags = ["--tokenizer", "default", "--workers", "1", "--unit-bytes", "2KB", "--no-progress"]
    assert tk.cli("pretrain", str(src), "--out", str(tmp_path / "local"), *flags).returncode == 0
    url = f"s3://{bucket}/web"
    env = cli_env(endpoint, tmp_path / "cache")  # the endpoint from AWS_ENDPOINT_URL, as a user's shell sets it
    args = ["pretrain", str(src), "--out", url, *flags, "--work-dir", str(tmp_path / "first")]
    committed = kill_after_markers(args, env, fs, f"{bucket}/web/_state/shards_v1/done", at_least=5)
    assert fs.exists(f"{bucket}/web/_state/lock.json")  # kill -9 leaves the lock object; this host sees it is stale
    assert not fs.exists(f"{bucket}/web/manifest.json")
    with pytest.raises(StorageError, match="holds no finished tokenmill run"):
        open_shards(url, storage_options={"endpoint_url": endpoint, "key": "testing", "secret": "testing"})

    resumed = tk_cli(env, "pretrain", str(src), "--out", url, *flags, "--work-dir", str(tmp_path / "second"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"manifest: {url}/manifest.json" in resumed.stdout
    remote = objects(fs, f"{bucket}/web")
    assert_same_as_local(remote, tmp_path / "local")
    assert committed < len(remote["_state/shards_v1/index.jsonl"].splitlines())


def tk_cli(env: dict, *args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "tokenmill.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def kill_after_markers(args: list[str], env: dict, fs, done: str, *, at_least: int) -> int:
    """Start the CLI, ``kill -9`` it once ``at_least`` unit markers are in the bucket; return how many were."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "tokenmill.cli", *args], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            fs.invalidate_cache()
            if fs.exists(done) and len(fs.ls(done)) >= at_least:
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    fs.invalidate_cache()
    return len(fs.ls(done))


def test_a_live_lock_and_a_foreign_prefix_are_refused(s3, tmp_path):
    fs, options, bucket = s3
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 20)
    out = RemoteOutput(f"s3://{bucket}/busy", storage_options=options, work_dir=tmp_path / "w")
    lock = {"host": socket.gethostname(), "pid": os.getpid(), "started": "now", "nonce": "x"}
    fs.pipe_file(f"{bucket}/busy/_state/lock.json", json.dumps(lock).encode())
    with pytest.raises(ConfigError, match=r"in use by another tokenmill run \(pid \d+"):
        run_pretrain([str(src)], out=out, tokenizer="default", workers=1, progress=False)
    fs.pipe_file(f"{bucket}/busy/_state/lock.json", json.dumps({**lock, "host": "elsewhere"}).encode())
    with pytest.raises(ConfigError, match="delete s3://.*/busy/_state/lock.json"):
        run_pretrain([str(src)], out=out, tokenizer="default", workers=1, progress=False)

    fs.pipe_file(f"{bucket}/mine/notes.txt", b"not tokenmill's")
    mine = RemoteOutput(f"s3://{bucket}/mine", storage_options=options, work_dir=tmp_path / "w2")
    with pytest.raises(ConfigError, match="refuses to clear"):
        run_pretrain([str(src)], out=mine, tokenizer="default", workers=1, progress=False, overwrite=True)
    assert fs.cat_file(f"{bucket}/mine/notes.txt") == b"not tokenmill's"


def test_ray_actors_publish_into_s3_with_the_local_bytes(s3, tmp_path):
    """The cluster case: Ray actors (their own processes) commit and upload the units, the driver finalizes."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")
    from tokenmill.engine.ray import RayExecutor

    fs, options, bucket = s3
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 200, seed=3, broken_every=29)
    common = {"tokenizer": "default", "unit_bytes": 4000, "shard_tokens": 600, "progress": False}
    run_pretrain([str(src)], out=tmp_path / "local", workers=1, **common)
    started = not ray.is_initialized()
    try:
        out = RemoteOutput(f"s3://{bucket}/ray", storage_options=options, work_dir=tmp_path / "w")
        run_pretrain([str(src)], out=out, executor=RayExecutor(workers=2), **common)
    finally:
        if started and ray.is_initialized():
            ray.shutdown()
    assert_same_as_local(objects(fs, f"{bucket}/ray"), tmp_path / "local")


def test_cli_storage_options_reach_the_server_and_a_missing_bucket_is_named(endpoint, tmp_path, monkeypatch, capsys):
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 10)
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)  # the endpoint comes from --storage-option alone
    args = ["pretrain", str(src), "--tokenizer", "default", "--workers", "1", "--no-progress",
            "--storage-option", f"endpoint_url={endpoint}", "--storage-option", "client_kwargs.region_name=us-east-1"]
    assert main([*args, "--out", "s3://no-such-bucket/run"]) == 1
    assert "the bucket 'no-such-bucket' does not exist" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "local")]) == 2  # storage options without a URL: a usage error
    assert "apply to an object-storage --out" in capsys.readouterr().err
    assert main(["curate", str(src), "--out", "s3://no-such-bucket/c", "--preset", "none"]) == 1
    assert "the bucket 'no-such-bucket' does not exist" in capsys.readouterr().err  # every job: named, not refused
