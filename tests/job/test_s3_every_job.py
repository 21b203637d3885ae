"""Every job writes to ``s3://``: the jobs whose later stages read the earlier ones' files (curate, select, lm
train, pref, quality train ...) run in the local work directory and publish the run whole when it ends (the
manifest last). On a real S3-compatible server (moto in server mode, started here; s3fs talks HTTP to it,
nothing is mocked), each gives the bytes of a local run of the same command, and a run killed with kill -9
in the middle of its upload resumes to the same objects."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

moto_server = pytest.importorskip("moto.moto_server.threaded_moto_server", reason="moto[server] is not installed")
s3fs = pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'tokenmill[s3]')")

from tokenmill.cli import main  # noqa: E402
from tokenmill.engine.store import _FILESYSTEMS  # noqa: E402
from wordkit import RECIPE, SHOP, WORDS  # noqa: E402

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
SRC = str(Path(__file__).resolve().parents[2] / "src")
# killed as the run uploads its outputs: the first half of the files are in the bucket, the rest and the manifest not
KILLED_IN_UPLOAD = """
import os, signal, sys
from tokenmill.engine.store import Store
real = Store.put_many
def put_many(self, work, rels):
    outputs = [r for r in rels if not r.startswith("_state/")]
    if len(outputs) > 1:
        real(self, work, outputs[: len(outputs) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    real(self, work, rels)
Store.put_many = put_many
from tokenmill.cli import main
sys.exit(main(sys.argv[1:]))
"""
# killed as the run's second stage starts: the first stage's files are in the work directory only
KILLED_IN_STAGES = """
import os, signal, sys
from tokenmill.engine.workflow import StageState
real, seen = StageState.prepare, []
def prepare(self, fingerprint):
    seen.append(self.key)
    if len(seen) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    real(self, fingerprint)
StageState.prepare = prepare
from tokenmill.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def endpoint():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(endpoint, tmp_path, monkeypatch):
    """(filesystem, bucket): a fresh bucket on the local server, the environment set as a user's shell sets it."""
    for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "TOKENMILL_CACHE": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(name, value)
    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="testing", secret="testing", skip_instance_cache=True)
    bucket = f"tm-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    yield fs, bucket
    # the filesystems the commands opened follow this test's environment: none outlives it in this process
    s3fs.S3FileSystem.clear_instance_cache()
    _FILESYSTEMS.clear()


def _lines(path: Path, rows: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return str(path)


def _docs(path: Path, words: list[str], n: int, seed: int) -> str:
    rng = random.Random(seed)
    return _lines(path, [{"id": f"d{i}", "text": " ".join(rng.choice(words) for _ in range(rng.randrange(110, 200)))}
                         for i in range(n)])


def _evals(path: Path) -> str:
    path.write_text(json.dumps({"question": " ".join(WORDS[:9]), "answer": "x"}) + "\n")
    return str(path)


def _pairs(path: Path, n: int) -> str:
    text = lambda i, k: " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(k))  # noqa: E731
    return _lines(path, [{"prompt": [{"role": "user", "content": f"question {i}: {text(i, 6)}?"}],
                          "chosen": [{"role": "assistant", "content": text(i + 1, 5 + i % 9)}],
                          "rejected": [{"role": "assistant", "content": text(i + 2, 3 + i % 4)}]} for i in range(n)])


JOBS = {
    "curate": lambda t: ["curate", _docs(t / "in" / "docs.jsonl", WORDS, 60, 1), "--preset", "none"],
    "select": lambda t: ["select", "--target", _docs(t / "in" / "ref.jsonl", WORDS, 20, 2), "--from",
                         _docs(t / "in" / "a.jsonl", WORDS, 30, 3), _docs(t / "in" / "b.jsonl", SHOP, 30, 4),
                         "--n", "20"],
    "lm train": lambda t: ["lm", "train", "--text", _docs(t / "in" / "docs.jsonl", WORDS, 80, 5), "--order", "3"],
    "pref": lambda t: ["pref", _pairs(t / "in" / "pairs.jsonl", 40), "--tokenizer", "default"],
    "decontaminate": lambda t: ["decontaminate", _docs(t / "in" / "docs.jsonl", WORDS, 40, 8), "--eval",
                                _evals(t / "evals.jsonl"), "--"],
    "sft select": lambda t: ["sft", "select", _lines(t / "in" / "chats.jsonl", [
        {"messages": [{"role": "user", "content": f"Question {i}: how far is the river from hill {i}?"},
                      {"role": "assistant", "content": f"It is {i} kilometres away, past the old mill."}]}
        for i in range(30)]), "--n", "5"],
    "quality train": lambda t: ["quality", "train", "--positive", _docs(t / "in" / "pos.jsonl", WORDS, 40, 6),
                                "--negative", _docs(t / "in" / "neg.jsonl", SHOP, 40, 7), "--param", "epoch=2"],
}
FLAGS = ["--workers", "1", "--unit-bytes", "4000", "--no-progress"]


def objects(fs, prefix: str) -> dict[str, bytes]:
    fs.invalidate_cache()
    return {key[len(prefix) + 1:]: fs.cat_file(key) for key in sorted(fs.find(prefix))}


def outputs(files: dict[str, bytes]) -> dict[str, bytes]:
    """A run's files but its state and the parts that record the run's own time (the manifest's and the
    card's ``run``; an export to a file writes them beside it, ``tokens.bin.manifest.json``)."""
    kept = {k: v for k, v in files.items() if not k.startswith("_state/") and not k.endswith("datacard.md")}
    for name in [k for k in kept if k.endswith(("manifest.json", "datacard.json"))]:
        doc = json.loads(files[name])
        doc.pop("run", None)
        kept[name] = json.dumps(doc, sort_keys=True).encode()
    return kept


def local_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_job_writes_to_s3_the_bytes_of_a_local_run(job, s3, tmp_path, capsys):
    if job == "quality train":
        pytest.importorskip("fasttext")
    fs, bucket = s3
    args = JOBS[job](tmp_path)
    assert main([*args, "--out", str(tmp_path / "local"), *FLAGS]) == 0, capsys.readouterr().err
    url = f"s3://{bucket}/runs/{job.replace(' ', '-')}"
    capsys.readouterr()
    assert main([*args, "--out", url, *FLAGS]) == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    assert url in said and "s3:/tm" not in said and "cache" not in said  # the summary names the bucket's keys
    remote = objects(fs, url[len("s3://"):])
    expected = outputs(local_files(tmp_path / "local"))
    assert sorted(outputs(remote)) == sorted(expected) and "manifest.json" in remote and "datacard.md" in remote
    assert [k for k, v in outputs(remote).items() if v != expected[k]] == []
    assert not [k for k in remote if ".tmp" in k or k == "_state/lock.json"]


def test_a_missing_bucket_is_named_before_anything_is_written(s3, tmp_path, capsys):
    args = JOBS["curate"](tmp_path)
    assert main([*args, "--out", "s3://no-such-bucket/run", *FLAGS]) == 1
    err = capsys.readouterr().err
    assert "the bucket 'no-such-bucket' does not exist" in err and "Traceback" not in err
    assert not any(p.name.startswith("s3") for p in tmp_path.rglob("*")) and not (tmp_path / "cache").exists()


def test_a_dry_run_into_s3_writes_nothing(s3, tmp_path, capsys):
    fs, bucket = s3
    assert main([*JOBS["curate"](tmp_path), "--out", f"s3://{bucket}/run", *FLAGS, "--dry-run"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert fs.find(bucket) == [] and not (tmp_path / "cache").exists()


def test_a_prefix_of_other_settings_or_of_another_job_is_refused(s3, tmp_path, capsys, monkeypatch):
    fs, bucket = s3
    url = f"s3://{bucket}/run"
    args = JOBS["curate"](tmp_path)
    assert main([*args, "--out", url, *FLAGS]) == 0
    first = objects(fs, f"{bucket}/run")
    assert main([*args, "--out", url, *FLAGS]) == 0  # a finished run taken again: the same objects
    assert outputs(objects(fs, f"{bucket}/run")) == outputs(first)
    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "other-cache"))  # a new work directory: the bucket guards
    capsys.readouterr()
    assert main([*args, "--out", url, *FLAGS, "--limit", "5"]) == 1
    assert "other inputs or settings" in capsys.readouterr().err
    assert main([*JOBS["lm train"](tmp_path), "--out", url, *FLAGS]) == 1
    assert "holds the output of `tokenmill curate`" in capsys.readouterr().err
    assert main([*args, "--out", url, *FLAGS, "--limit", "5", "--overwrite"]) == 0
    manifest = json.loads(fs.cat_file(f"{bucket}/run/manifest.json"))
    assert manifest["counts"]["input"] == 5


@pytest.mark.parametrize("at", ["stages", "upload"])
def test_a_run_killed_resumes_to_the_same_objects(at, s3, tmp_path):
    fs, bucket = s3
    args = [*JOBS["curate"](tmp_path), *FLAGS]
    env = {**os.environ, "PYTHONPATH": SRC}
    local = subprocess.run([sys.executable, "-m", "tokenmill.cli", *args, "--out", str(tmp_path / "local")], env=env,
                           capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    url = f"s3://{bucket}/killed"
    script = {"stages": KILLED_IN_STAGES, "upload": KILLED_IN_UPLOAD}[at]
    killed = subprocess.run([sys.executable, "-c", script, *args, "--out", url], env=env,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    half = objects(fs, f"{bucket}/killed")
    assert "manifest.json" not in half  # detectably unfinished
    if at == "upload":
        assert "_state/job.json" in half and any(not k.startswith("_state/") for k in half)  # --overwrite knows it

    resumed = subprocess.run([sys.executable, "-m", "tokenmill.cli", *args, "--out", url], env=env,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert outputs(objects(fs, f"{bucket}/killed")) == outputs(local_files(tmp_path / "local"))


@pytest.mark.parametrize("command", [["curate", "--preset", "none"], ["pretrain", "--tokenizer", "default"]])
def test_an_input_on_s3_is_read_like_a_local_one(command, s3, tmp_path, capsys):
    fs, bucket = s3
    src = _docs(tmp_path / "in" / "docs.jsonl", WORDS, 30, 9)
    fs.put_file(src, f"{bucket}/in/docs.jsonl")
    assert main([command[0], src, *command[1:], "--out", str(tmp_path / "local"), *FLAGS]) == 0
    assert main([command[0], f"s3://{bucket}/in/docs.jsonl", *command[1:], "--out", str(tmp_path / "remote"),
                 *FLAGS]) == 0, capsys.readouterr().err
    remote, local = local_files(tmp_path / "remote"), local_files(tmp_path / "local")
    made = [k for k in local if k.startswith(("documents/", "shard-"))]
    assert made and {k: remote.get(k) for k in made} == {k: local[k] for k in made}




def test_plan_writes_to_s3_and_a_rerun_keeps_a_users_object(s3, tmp_path, capsys):
    fs, bucket = s3
    assert main(["pretrain", _docs(tmp_path / "in" / "docs.jsonl", WORDS, 30, 10), "--tokenizer", "default",
                 "--out", str(tmp_path / "shards"), *FLAGS]) == 0
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    url = f"s3://{bucket}/plan"
    assert main(["plan", str(recipe), "--out", url, "--dry-run"]) == 0
    assert f"would write {url}/plan.json" in capsys.readouterr().out and fs.find(bucket) == []  # nothing written
    assert main(["plan", str(recipe), "--out", str(tmp_path / "local")]) == 0
    assert main(["plan", str(recipe), "--out", url]) == 0, capsys.readouterr().err
    assert f"wrote {url}/plan.json" in capsys.readouterr().out
    remote = objects(fs, f"{bucket}/plan")
    local = local_files(tmp_path / "local")
    assert {k: remote[k] for k in ("plan.json", "plan.html")} == {k: local[k] for k in ("plan.json", "plan.html")}
    fs.pipe_file(f"{bucket}/plan/plan-notes.md", b"mine")  # a user's object beside the plan
    fs.pipe_file(f"{bucket}/plan/report.html", b"my report")  # under a name tokenmill writes elsewhere
    assert main(["plan", str(recipe), "--out", url]) == 0, capsys.readouterr().err  # a rerun replaces its own
    again = objects(fs, f"{bucket}/plan")
    assert again["plan-notes.md"] == b"mine" and again["report.html"] == b"my report"
    assert again["plan.json"] == local["plan.json"]
    assert main(["curate", _docs(tmp_path / "in2" / "d.jsonl", WORDS, 5, 11), "--preset", "none", "--out", url,
                 *FLAGS]) == 1
    assert "holds the output of `tokenmill plan`" in capsys.readouterr().err


def test_card_rebuilds_the_card_of_a_run_on_s3(s3, tmp_path, capsys):
    fs, bucket = s3
    args = JOBS["curate"](tmp_path)
    url = f"s3://{bucket}/run"
    assert main([*args, "--out", str(tmp_path / "local"), *FLAGS]) == 0
    assert main([*args, "--out", url, *FLAGS]) == 0
    fs.rm(f"{bucket}/run/datacard.md")
    capsys.readouterr()
    assert main(["card", url, "--dry-run"]) == 0
    assert "(nothing written)" in capsys.readouterr().out and not fs.exists(f"{bucket}/run/datacard.md")
    assert main(["card", str(tmp_path / "local")]) == 0
    assert main(["card", url]) == 0, capsys.readouterr().err
    assert f"data card: {url}/datacard.md" in capsys.readouterr().out
    remote = objects(fs, f"{bucket}/run")
    local = local_files(tmp_path / "local")
    assert remote["datacard.md"] == local["datacard.md"]
    assert "datacard.md" in json.loads(remote["_state/published.json"])["files"]
    assert main(["card", url]) == 0  # again: it replaces the card it wrote

    fs.pipe_file(f"{bucket}/foreign/manifest.json", remote["manifest.json"])  # a prefix tokenmill did not write
    assert main(["card", f"s3://{bucket}/foreign"]) == 1
    assert "is not a tokenmill output" in capsys.readouterr().err and not fs.exists(f"{bucket}/foreign/datacard.md")


# killed in the middle of an export's upload: its record (sidecar, manifest) is up, the data not all
KILLED_IN_EXPORT = """
import os, signal, sys
from tokenmill.engine.store import Store
real, puts = Store.put, []
def put(self, local, rel):
    puts.append(rel)
    if len(puts) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    real(self, local, rel)
Store.put = put
from tokenmill.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("to", ["bin", "hf"])
def test_an_export_killed_during_its_upload_is_taken_again_with_the_same_bytes(to, s3, tmp_path):
    if to == "hf":
        pytest.importorskip("datasets")
    fs, bucket = s3
    env = {**os.environ, "PYTHONPATH": SRC}
    shards = tmp_path / "shards"
    assert main(["pretrain", _docs(tmp_path / "in" / "docs.jsonl", WORDS, 40, 12), "--tokenizer", "default",
                 "--out", str(shards), *FLAGS]) == 0
    url = {"bin": f"s3://{bucket}/{{}}/tokens.bin", "hf": f"s3://{bucket}/{{}}"}[to]
    clean = ["export", str(shards), "--to", to, "--out", url.format("clean")]
    assert main(clean) == 0
    args = ["export", str(shards), "--to", to, "--out", url.format("killed")]
    killed = subprocess.run([sys.executable, "-c", KILLED_IN_EXPORT, *args], env=env, capture_output=True, text=True,
                            timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    again = subprocess.run([sys.executable, "-m", "tokenmill.cli", *args], env=env, capture_output=True, text=True,
                           timeout=300)  # the same command, no flag: the killed upload is redone
    assert again.returncode == 0, again.stderr
    assert _export(objects(fs, f"{bucket}/killed")) == _export(objects(fs, f"{bucket}/clean"))


def _export(files: dict[str, bytes]) -> dict[str, bytes]:
    """An export's objects but the times they record; ``datasets`` draws a new ``_fingerprint`` for every save."""
    kept = outputs(files)
    if "state.json" in kept:
        state = json.loads(kept["state.json"])
        state.pop("_fingerprint", None)
        kept["state.json"] = json.dumps(state, sort_keys=True).encode()
    return kept


def test_demo_writes_to_s3_and_a_rerun_keeps_a_users_object(s3, tmp_path, capsys):
    pytest.importorskip("torch")
    fs, bucket = s3
    url = f"s3://{bucket}/demo"
    assert main(["demo", "--out", url, "--dry-run"]) == 0
    assert f"{url}/pretrain" in capsys.readouterr().out and fs.find(bucket) == []  # nothing written
    assert main(["demo", "--out", str(tmp_path / "local")]) == 0
    assert main(["demo", "--out", url]) == 0, capsys.readouterr().err
    assert f"published to {url}" in capsys.readouterr().out
    remote, local = objects(fs, f"{bucket}/demo"), local_files(tmp_path / "local")
    made = [k for k in local if "_state" not in k.split("/") and not k.endswith(("manifest.json", "datacard.md",
                                                                                     "datacard.json"))]
    assert any(k.startswith("pretrain/shard-") for k in made) and any(k.startswith("sft/shard-") for k in made)
    assert {k: remote.get(k) for k in made} == {k: local[k] for k in made}
    assert {"pretrain/manifest.json", "sft/manifest.json"} <= set(remote)
    fs.pipe_file(f"{bucket}/demo/notes.md", b"mine")
    assert main(["demo", "--out", url]) == 0, capsys.readouterr().err
    again = objects(fs, f"{bucket}/demo")
    assert again["notes.md"] == b"mine" and {k: again.get(k) for k in made} == {k: local[k] for k in made}
