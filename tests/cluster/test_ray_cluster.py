"""The multi-node tier: a Ray cluster of two nodes, a head and a worker each started with ``ray start`` (their
own temp dirs and resources, on this machine), runs ``tokenmill curate --preset dclm`` then ``tokenmill
pretrain`` from and to an S3 server (moto's, started here; s3fs talks HTTP to it) and leaves in the bucket
the bytes the local engine writes to a directory. A worker node whose raylet is killed while one of its
units runs is survived, in ``curate`` and in ``pretrain`` (there once some of the stage's units have
committed and before all have): its unit is retried on the nodes left, to the same bytes.

Skips, saying why, where ``ray start`` cannot bring up the nodes."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")
moto_server = pytest.importorskip("moto.moto_server.threaded_moto_server", reason="moto[server] is not installed")
s3fs = pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'tokenmill[s3]')")
pytest.importorskip("fasttext", reason="fasttext is not installed (pip install 'tokenmill[quality]')")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "curate"))
from clusterkit import ENV, REPO, Cluster  # noqa: E402
from raykit import STOP, WORDS, write_web_corpus  # noqa: E402

import statekit
from tokenmill.curate.quality.classifier import train_quality  # noqa: E402
from tokenmill.engine.store import work_dir_for  # noqa: E402

pytestmark = pytest.mark.cluster
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
FLAGS = ["--unit-bytes", "8000", "--no-progress"]
DOCUMENTS = 70  # and their copies: about 100 records, 9 units
LEDGERED = ["--preset", "gopher"]  # pretrain's own steps: its units write ledger parts beside their shards


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(environment, filesystem, bucket, cluster, inputs, local): the S3 server with the input uploaded, the
    quality model, the two nodes, and the commands' files from the local engine (run while the nodes start;
    ``inputs["documents"]``: the documents its curate wrote). The nodes are stopped (their processes killed)
    whatever happens."""
    root = tmp_path_factory.mktemp("cluster")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    cluster = Cluster(root)
    try:
        try:
            head = cluster.launch("node_a", head=True)
        except RuntimeError as e:
            pytest.skip(f"ray cannot start two nodes on this machine: {e}")
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        env = {**os.environ, **CREDENTIALS, **ENV, "AWS_ENDPOINT_URL": endpoint, "TOKENMILL_CACHE": str(root / "cache")}
        fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="testing", secret="testing", skip_instance_cache=True)
        bucket = f"tm-{uuid.uuid4().hex[:12]}"
        fs.mkdir(bucket)
        src = write_web_corpus(root / "in" / "web.jsonl", DOCUMENTS)
        fs.put_file(str(src), f"{bucket}/in/web.jsonl")
        inputs = {"src": str(src), "model": _model(root / "quality.bin"),
                  "documents": str(root / "local" / "curated" / "documents")}
        try:
            cluster.wait(head)
            worker = cluster.launch("node_b")
            local = _local(env, inputs, root / "local")
            cluster.wait(worker)
        except RuntimeError as e:
            pytest.skip(f"ray cannot start two nodes on this machine: {e}")
        yield env, fs, bucket, cluster, inputs, local
    finally:
        cluster.stop()
        server.stop()


def _local(env: dict, inputs: dict, root: Path) -> dict[str, dict[str, bytes]]:
    """The two commands with the local engine, into local directories, and ``pretrain`` again with the
    :data:`LEDGERED` steps."""
    documents = inputs["documents"]
    tokenmill(env, *curate(inputs["src"], str(root / "curated"), inputs["model"], "--workers", "1"))
    tokenmill(env, *pretrain(documents, str(root / "shards"), "--workers", "1"))
    tokenmill(env, *pretrain(documents, str(root / "ledgered"), *LEDGERED, "--workers", "1"))
    sources = {"curated": inputs["src"], "shards": documents, "ledgered": documents}
    return {name: outputs(local_files(root / name), source) for name, source in sources.items()}


def _model(out: Path) -> str:
    rng = random.Random(0)
    good = [" ".join(rng.choice(STOP + list(WORDS)) for _ in range(60)) + "." for _ in range(200)]
    spam = [" ".join(rng.choice("click here buy now cheap deal free win prize".split()) for _ in range(60))
            for _ in range(200)]
    train_quality(good, spam, out=out, quantize=False)
    return str(out)


def tokenmill(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "tokenmill.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def curate(src: str, out: str, model: str, *engine: str) -> list[str]:
    return ["curate", src, "--preset", "dclm", "--quality-model", model, "--out", out, *FLAGS, *engine]


def pretrain(src: str, out: str, *engine: str) -> list[str]:
    return ["pretrain", src, "--tokenizer", "default", "--out", out, *FLAGS, *engine]


def outputs(files: dict[str, bytes], source: str) -> dict[str, bytes]:
    """A run's files but its state and the parts that record the run's own time (the manifest's and the
    card's ``run``), with the input's address (``source``, named by the manifest and the report) as <input>."""
    kept = {k: v for k, v in files.items() if not k.startswith("_state/") and k not in ("manifest.json", "datacard.md")}
    for name in ("manifest.json", "datacard.json"):
        if name in files:
            doc = json.loads(files[name])
            doc.pop("run", None)
            kept[name] = json.dumps(doc, sort_keys=True).encode()
    return {k: v.replace(source.encode(), b"<input>") for k, v in kept.items()}


def bucket_files(fs, prefix: str) -> dict[str, bytes]:
    fs.invalidate_cache()
    return {key[len(prefix) + 1:]: fs.cat_file(key) for key in sorted(fs.find(prefix))}


def local_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_two_nodes_curate_then_pretrain_from_and_to_s3_give_the_local_bytes(world):
    env, fs, bucket, cluster, inputs, local = world
    nodes = cluster.alive()
    assert len(nodes) == 2 and {"node_a", "node_b"} <= {k for n in nodes for k in n}
    ray = ["--engine", "ray", "--ray-address", cluster.address]
    tokenmill(env, *curate(f"s3://{bucket}/in/web.jsonl", f"s3://{bucket}/curated", inputs["model"], *ray))
    tokenmill(env, *pretrain(f"s3://{bucket}/curated/documents", f"s3://{bucket}/shards", *ray))

    curated = bucket_files(fs, f"{bucket}/curated")
    manifest = json.loads(curated["manifest.json"])
    assert manifest["run"]["engine"] == "ray" and manifest["counts"]["filtered"]["quality_v1:low_quality"] > 0
    assert manifest["counts"]["filtered"]["minhash_dedup_v1:duplicate"] > 0
    assert outputs(curated, f"s3://{bucket}/in/web.jsonl") == local["curated"]
    shards = bucket_files(fs, f"{bucket}/shards")
    assert any(k.startswith("shard-") for k in shards) and outputs(shards, f"s3://{bucket}/curated/documents") == local["shards"]
    assert [n.name for n in cluster.nodes if n.ran_units()] == ["node_a", "node_b"]  # both nodes ran units


def test_a_worker_node_killed_mid_run_is_survived_with_the_same_bytes(world):
    """A third node joins, takes units, and its raylet is killed (SIGKILL) while one of its units runs: the
    run goes on on the nodes left and the bucket holds the local bytes."""
    env, fs, bucket, cluster, inputs, local = world
    doomed = cluster.start("node_c")
    ray = ["--engine", "ray", "--ray-address", cluster.address]
    args = curate(f"s3://{bucket}/in/web.jsonl", f"s3://{bucket}/killed", inputs["model"], *ray)
    run = subprocess.Popen([sys.executable, "-m", "tokenmill.cli", *args], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=REPO)
    killed = False
    try:
        while run.poll() is None and not killed:
            if doomed.running_units():
                doomed.raylet().kill()
                killed = True
            time.sleep(0.02)
        _, err = run.communicate(timeout=240)  # before: the lost actor, restarted by Ray, waited for a CPU forever
    finally:
        run.kill()
    assert killed, "the run ended before a unit ran on the third node"
    assert run.returncode == 0, err[-3000:]
    assert len(cluster.alive()) == 2
    assert outputs(bucket_files(fs, f"{bucket}/killed"), f"s3://{bucket}/in/web.jsonl") == local["curated"]


def test_a_worker_node_killed_mid_pretrain_is_survived_with_the_same_bytes(world, monkeypatch):
    """``pretrain`` of the curated documents, with its own steps (:data:`LEDGERED`), from and to the bucket: a
    fourth node joins, and its raylet is killed (SIGKILL) while one of its units runs, once some units of the
    stage have committed (their markers in the work directory) and before all have. The run goes on on the
    nodes left and the bucket holds the local bytes: shards, ledger, rejects, manifest (but its ``run``)."""
    env, fs, bucket, cluster, inputs, local = world
    source = f"s3://{bucket}/local-curated/documents"
    for path in sorted(Path(inputs["documents"]).iterdir()):  # the documents the local pretrain read
        fs.put_file(str(path), f"{source[5:]}/{path.name}")
    doomed = cluster.start("node_d")
    out = f"s3://{bucket}/pretrain-killed"
    monkeypatch.setenv("TOKENMILL_CACHE", env["TOKENMILL_CACHE"])
    done = work_dir_for(out) / "_state" / "shards_v1" / "done"  # pretrain's one stage: its commit journals
    args = pretrain(source, out, *LEDGERED, "--engine", "ray", "--ray-address", cluster.address)
    run = subprocess.Popen([sys.executable, "-m", "tokenmill.cli", *args], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=REPO)
    committed = 0  # the stage's units committed when the node was killed
    try:
        while run.poll() is None and not committed:
            if doomed.running_units() and (n := statekit.count(done)):
                doomed.raylet().kill()
                committed = n
            time.sleep(0.02)
        _, err = run.communicate(timeout=240)
    finally:
        run.kill()
    assert committed, "the run ended before a unit ran on the fourth node after others had committed"
    assert run.returncode == 0, err[-3000:]
    files = bucket_files(fs, out[5:])
    assert committed < json.loads(files["manifest.json"])["run"]["units"]  # killed mid-stage
    assert len(cluster.alive()) == 2
    assert any(k.startswith("ledger/") for k in files) and outputs(files, source) == local["ledgered"]
