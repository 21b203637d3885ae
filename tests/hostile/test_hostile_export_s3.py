"""``tokenmill export --out s3://...`` on a real S3-compatible server (moto in server mode, on a free port;
s3fs talks HTTP to it): the objects are the bytes of a local export, a target the export did not write is
refused, ``--overwrite`` replaces only its own, ``--dry-run`` writes nothing (issue 41 item 6)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import hostilekit as hk
import pytest

moto_server = pytest.importorskip("moto.moto_server.threaded_moto_server", reason="moto[server] is not installed")
s3fs = pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'tokenmill[s3]')")

from tokenmill.cli import main  # noqa: E402
from tokenmill.engine import store  # noqa: E402


@pytest.fixture(scope="module")
def endpoint():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(endpoint, monkeypatch, tmp_path):
    """A fresh bucket; the environment a user's shell would set for it (credentials, endpoint, cache)."""
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": endpoint, "TOKENMILL_CACHE": str(tmp_path / "cache")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True)
    name = f"tm-{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    _forget_filesystems()
    yield fs, name
    _forget_filesystems()  # opened from this test's environment: another test's endpoint must not find them


def _forget_filesystems() -> None:
    """Drop the filesystems opened from the environment (fsspec's instance cache, the store's own)."""
    s3fs.S3FileSystem.clear_instance_cache()
    store._FILESYSTEMS.clear()


def _objects(fs, prefix: str) -> dict[str, bytes]:
    fs.invalidate_cache()
    return {key[len(prefix) + 1:]: fs.cat_file(key) for key in sorted(fs.find(prefix))}


def _shards(tmp_path: Path) -> Path:
    out = tmp_path / "shards"
    hk.pretrain([hk.docs(tmp_path / "in" / "docs.jsonl", 30)], out, tokenizer="default")
    return out


@pytest.mark.parametrize("to", ["bin", "megatron"])
def test_a_file_export_to_s3_is_the_local_bytes(to, bucket, tmp_path, capsys):
    fs, name = bucket
    shards = _shards(tmp_path)
    assert main(["export", str(shards), "--to", to, "--out", str(tmp_path / "tokens"), "--seq-len", "8"]) == 0
    url = f"s3://{name}/flat/tokens"
    assert main(["export", str(shards), "--to", to, "--out", url, "--seq-len", "8", "--dry-run"]) == 0
    assert "nothing written" in capsys.readouterr().out and _objects(fs, f"{name}/flat") == {}
    assert main(["export", str(shards), "--to", to, "--out", url, "--seq-len", "8"]) == 0, capsys.readouterr().err
    local = _timeless({p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("tokens")})
    assert "tokens.manifest.json" in local and "tokens.datacard.md" in local  # the export's envelope and card
    assert _timeless(_objects(fs, f"{name}/flat")) == local  # the same bytes, nothing else: no lock, no .tmp
    assert not [p for p in (tmp_path / "cache" / "out").rglob("*") if p.is_file()]  # the work copy is gone
    assert main(["export", str(shards), "--to", to, "--out", url]) == 1
    assert "pass --overwrite" in capsys.readouterr().err
    assert main(["export", str(shards), "--to", to, "--out", url, "--seq-len", "8", "--overwrite"]) == 0
    assert _timeless(_objects(fs, f"{name}/flat")) == local


def _timeless(files: dict[str, bytes]) -> dict[str, bytes]:
    """An export's files with its manifest's ``run`` (its seconds and memory) left out."""
    manifest = json.loads(files.get("tokens.manifest.json", b"{}"))
    manifest.pop("run", None)
    return {**files, "tokens.manifest.json": json.dumps(manifest, sort_keys=True).encode()}


def test_an_s3_target_the_export_did_not_write_is_refused(bucket, tmp_path, capsys):
    fs, name = bucket
    fs.pipe_file(f"{name}/mine/tokens.bin", b"the user's own object")
    argv = ["export", str(_shards(tmp_path)), "--to", "bin", "--out", f"s3://{name}/mine/tokens.bin", "--overwrite"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "is not a bin export" in err and "Traceback" not in err, err
    assert _objects(fs, f"{name}/mine") == {"tokens.bin": b"the user's own object"}


def test_an_hf_export_to_s3_holds_the_dataset_its_manifest_and_card(bucket, tmp_path, capsys):
    pytest.importorskip("datasets")
    fs, name = bucket
    shards = _shards(tmp_path)
    assert main(["export", str(shards), "--to", "hf", "--out", f"s3://{name}/hf"]) == 0, capsys.readouterr().err
    got = _objects(fs, f"{name}/hf")
    assert {"manifest.json", "datacard.md", "datacard.json", "dataset_info.json", "state.json"} <= set(got), sorted(got)
    assert not [k for k in got if k.startswith("_state/") or ".tmp" in k]
    assert main(["export", str(shards), "--to", "hf", "--out", f"s3://{name}/hf", "--overwrite"]) == 0


def test_a_missing_bucket_names_the_out(bucket, tmp_path):
    result = subprocess.run([sys.executable, "-m", "tokenmill.cli", "export", str(_shards(tmp_path)), "--to", "bin",
                             "--out", "s3://no-such-bucket-here/run"], capture_output=True, text=True, timeout=120,
                            env=os.environ.copy())
    assert result.returncode == 1 and "no-such-bucket-here" in result.stderr and "Traceback" not in result.stderr, \
        result.stderr


# a real `tokenmill export` killed with SIGKILL once it has uploaded two objects of its export
KILLED_IN_UPLOAD = """
import os, signal, sys
from tokenmill.engine.store import Store
real, seen = Store.put, []
def put(self, path, rel):
    real(self, path, rel)
    seen.append(rel)
    if len(seen) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
Store.put = put
from tokenmill.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("to", ["bin", "hf"])
def test_an_export_killed_in_its_upload_is_done_again_by_the_same_command(to, bucket, tmp_path, capsys):
    if to == "hf":
        pytest.importorskip("datasets")
    fs, name = bucket
    argv = ["export", str(_shards(tmp_path)), "--to", to, "--seq-len", "8", "--out", f"s3://{name}/x/tokens"]
    killed = subprocess.run([sys.executable, "-c", KILLED_IN_UPLOAD, *argv], capture_output=True, text=True,
                            timeout=120, env=os.environ.copy())
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(_objects(fs, f"{name}/x")) == 3  # two objects of the export, and the dead run's lock object
    assert main(argv) == 0, capsys.readouterr().err  # no --overwrite: the killed run's work directory is there
    again = _objects(fs, f"{name}/x")
    assert main([*argv[:-1], f"s3://{name}/clean/tokens"]) == 0
    clean = _objects(fs, f"{name}/clean")
    assert sorted(again) == sorted(clean) and len(again) >= 5
    assert [k for k in again if again[k] != clean[k] and not k.endswith(("manifest.json", "state.json"))] == []
