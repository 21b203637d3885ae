"""The commands that write outside the track driver (``export``, ``card``, ``plan``, ``demo``, ``quality
train``) take ``--out`` through the same guard as every run: ``--overwrite`` removes exactly what an earlier
run recorded as written, a folder tokenmill did not write is refused, one run at a time holds an ``--out``,
a run killed at any point leaves an ``--out`` it can take again, and an ``s3://`` ``--out`` is never a
local folder named ``s3:`` (issue 42, data loss 1-6)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import hostilekit as hk
import pytest

from tokenmill.cli import main

SHARD_FILES = ("docs", "ids", "idx", "json")  # what one shard of a pretrain output is


# a real `tokenmill` process killed with SIGKILL right after tokenmill's own atomic write of a file named
# argv[1] in its _state/ has written its temporary sibling (``job.json.tmp``), before the rename
KILLED_AT_WRITE = """
import os, signal, sys
import tokenmill.engine.outdir as outdir
real = outdir.atomic_write
def killed(path, data):
    if path.name == sys.argv[1]:
        path.with_name(path.name + ".tmp").write_bytes(data)
        os.kill(os.getpid(), signal.SIGKILL)
    real(path, data)
outdir.atomic_write = killed
outdir.replace_file = killed  # the record's writer
from tokenmill.cli import main
sys.exit(main(sys.argv[2:]))
"""

# a real pretrain run (with --overwrite) killed with SIGKILL when its step sees the document ``argv[1]`` ("" = never), or (argv[2]
# == "finalize") when the data card is written: after the manifest and the merged rejects
KILLED_RUN = """
import os, signal, sys
import pyarrow as pa
from tokenmill.pretrain import run_pretrain
marker, where, out, *inputs = sys.argv[1:]
def step(batch):
    if marker in batch.column("id").to_pylist():
        os.kill(os.getpid(), signal.SIGKILL)
    return batch, {}
if where == "finalize":
    import tokenmill.job.run as driver  # the driver writes the card after the manifest
    driver.write_datacard = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
run_pretrain(inputs, out=out, tokenizer="default", workers=1, progress=False, unit_bytes=1024, overwrite=True,
             steps=[step] if marker else [])
"""


def _python(script: str, *args, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          timeout=120, **popen)


def _shards(tmp_path: Path) -> Path:
    out = tmp_path / "shards"
    hk.pretrain([hk.docs(tmp_path / "in" / "docs.jsonl", 30)], out, tokenizer="default")
    return out


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _users_files(out: Path) -> dict[str, str]:
    """Files a user adds to an output, under names tokenmill reserves for its own files elsewhere."""
    files = {"report.html": "my report", "documents/mine.jsonl": "my documents", "val/notes.txt": "my notes",
             "selected.jsonl": "my selection", "README.md": "my readme"}
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return files


def _kept(out: Path, files: dict[str, str]) -> None:
    assert {rel: (out / rel).read_text() if (out / rel).is_file() else None for rel in files} == files


# ---- 1. export --to hf --overwrite -------------------------------------------------------------------------

def test_export_hf_overwrite_keeps_the_files_a_user_added(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    shards, target = _shards(tmp_path), tmp_path / "hf"
    argv = ["export", str(shards), "--to", "hf", "--out", str(target)]
    assert main(argv) == 0
    (target / "mine.txt").write_text("mine")
    (target / "notes").mkdir()
    (target / "notes" / "a.txt").write_text("mine too")
    assert main([*argv, "--overwrite"]) == 0, capsys.readouterr().err
    assert (target / "mine.txt").read_text() == "mine" and (target / "notes" / "a.txt").read_text() == "mine too"
    assert len(datasets.load_from_disk(str(target))) == 30
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tokenmill-hf")]  # nothing beside --out


def test_export_hf_into_its_input_directory_is_refused(tmp_path, capsys):
    pytest.importorskip("datasets")
    shards = _shards(tmp_path)
    before = _tree(shards)
    assert main(["export", str(shards), "--to", "hf", "--out", str(shards / "hf")]) == 1
    err = capsys.readouterr().err
    assert "inside the input directory" in err and "Traceback" not in err, err
    assert _tree(shards) == before


# ---- 2. card -----------------------------------------------------------------------------------------------

def test_card_refuses_a_folder_tokenmill_did_not_write(tmp_path, capsys):
    folder = tmp_path / "theirs"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"track": "pretrain", "counts": {"kept": 1}}))
    (folder / "datacard.md").write_text("their card")
    before = _tree(folder)
    assert main(["card", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "not a tokenmill output" in err and "Traceback" not in err, err
    assert _tree(folder) == before  # not even a lock file


def test_card_writes_into_a_tokenmill_output_and_overwrite_removes_it_again(tmp_path, capsys):
    shards = _shards(tmp_path)
    (shards / "datacard.md").unlink()
    (shards / "datacard.json").unlink()
    (shards / "mine.txt").write_text("mine")
    assert main(["card", str(shards)]) == 0, capsys.readouterr().err
    assert (shards / "datacard.md").is_file()
    hk.pretrain([hk.docs(tmp_path / "in2" / "docs.jsonl", 5)], shards, tokenizer="default", overwrite=True)
    assert (shards / "mine.txt").read_text() == "mine"
    assert json.loads((shards / "manifest.json").read_text())["counts"]["kept"] == 5


# ---- 3. --overwrite removes exactly what the earlier run wrote --------------------------------------------

def test_overwrite_keeps_reserved_names_the_workflow_never_wrote(tmp_path):
    data = hk.docs(tmp_path / "in" / "docs.jsonl", 8)
    out = tmp_path / "out"
    hk.pretrain([data], out, tokenizer="default")
    files = _users_files(out)
    hk.pretrain([data], out, tokenizer="default", overwrite=True)
    _kept(out, files)
    assert json.loads((out / "manifest.json").read_text())["counts"]["kept"] == 8


def test_a_plan_rerun_keeps_a_users_files(tmp_path, capsys):
    _shards(tmp_path)
    (tmp_path / "recipe.yaml").write_text(hk.RECIPE)
    out = tmp_path / "plan"
    assert main(["plan", str(tmp_path / "recipe.yaml"), "--out", str(out)]) == 0, capsys.readouterr().err
    files = _users_files(out)
    assert main(["plan", str(tmp_path / "recipe.yaml"), "--out", str(out)]) == 0, capsys.readouterr().err
    _kept(out, files)
    assert json.loads((out / "plan.json").read_text())["sources"]["web"]["tokens_available"] > 0


def test_a_demo_rerun_keeps_a_users_files(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    files = _users_files(out)
    assert main(["demo", "--out", str(out)]) == 0, capsys.readouterr().err
    _kept(out, files)


@pytest.mark.parametrize("where", ["units", "finalize"])
def test_overwrite_removes_what_a_killed_run_committed(where, tmp_path):
    """A run killed mid-stage (unit markers) or in its finalize (the stage's index, the manifest and the merged
    rejects) wrote files no record of its end lists: --overwrite still removes every one, and only those."""
    out = tmp_path / "out"
    hk.pretrain([hk.docs(tmp_path / "in0" / "first.jsonl", 3)], out, tokenizer="default")
    files = _users_files(out)  # added to a finished output, before the run that is killed
    data = tmp_path / "in" / "big.jsonl"
    hk.docs(data, 200, words=20)
    with open(data, "a") as fh:
        fh.write('{"id": "broken", "text": 7}\n')  # a reject: rejects.jsonl is written by the finalize
    killed = _python(KILLED_RUN, "doc-150" if where == "units" else "", where, out, data)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and "_state" not in p.parts}
    assert any(name.startswith("shard-000001") for name in written), written
    if where == "finalize":
        assert "manifest.json" in written and (out / "rejects.jsonl").stat().st_size > 0
    (out / "notes.txt").write_text("written after the kill")
    files["notes.txt"] = "written after the kill"
    hk.pretrain([hk.docs(tmp_path / "in2" / "small.jsonl", 3)], out, tokenizer="default", overwrite=True)
    left = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and "_state" not in p.parts}
    assert left - set(files) == {"manifest.json", "rejects.jsonl", "datacard.md", "datacard.json",
                                 *(f"shard-000000-0000.{ext}" for ext in SHARD_FILES)}
    _kept(out, files)
    assert (out / "rejects.jsonl").read_bytes() == b""  # the killed run's rejects are not left in place


def test_overwrite_refuses_an_output_with_no_record_of_its_files(tmp_path, capsys):
    """An output an older tokenmill wrote (no record of its files) is never cleared by guessing at names."""
    data = hk.docs(tmp_path / "in" / "docs.jsonl", 8)
    out = tmp_path / "out"
    hk.pretrain([data], out, tokenizer="default")
    (out / "_state" / "written.json").unlink()
    files = _users_files(out)
    before = {rel: b for rel, b in _tree(out).items() if not rel.startswith("_state")}
    code = main(["pretrain", str(data), "--out", str(out), "--tokenizer", "default", "--workers", "1",
                 "--no-progress", "--overwrite"])
    err = capsys.readouterr().err
    assert code == 1 and "kept no record of the files it wrote" in err, err
    assert {rel: b for rel, b in _tree(out).items() if not rel.startswith("_state")} == before
    _kept(out, files)
    hk.pretrain([data], out, tokenizer="default")  # a resume needs no record: nothing is deleted


# ---- 4. --out s3://... -----------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["plan", "quality train", "demo"])  # export uploads: test_hostile_export_s3.py
def test_an_s3_out_is_never_a_local_folder(command, tmp_path):
    shards = _shards(tmp_path)
    (tmp_path / "recipe.yaml").write_text(hk.RECIPE)
    pos, neg = hk.docs(tmp_path / "pos.jsonl", 10), hk.docs(tmp_path / "neg.jsonl", 10, start=10)
    argv = {"export hf": ["export", shards, "--to", "hf"], "export bin": ["export", shards, "--to", "bin"],
            "plan": ["plan", tmp_path / "recipe.yaml"],
            "quality train": ["quality", "train", "--positive", pos, "--negative", neg], "demo": ["demo"]}[command]
    work = tmp_path / "cwd"
    work.mkdir()
    result = hk.cli(*argv, "--out", "s3://no-such-bucket/run", cwd=work)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "s3://no-such-bucket/run" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert list(work.iterdir()) == []  # no folder named s3:


# ---- 5. one run at a time --------------------------------------------------------------------------------

def _paused(at: str, *argv) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", hk.PAUSED, at, *map(str, argv)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if line.strip() != "paused":
        proc.kill()
        raise AssertionError(f"the first run never reached {at}: {line}{proc.stderr.read()}")
    return proc


def _resume(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(input="", timeout=120)
    return proc.returncode, err


def test_a_second_export_into_a_busy_out_is_refused_naming_the_first(tmp_path):
    datasets = pytest.importorskip("datasets")
    shards, target = _shards(tmp_path), tmp_path / "hf"
    argv = ["export", shards, "--to", "hf", "--out", target, "--overwrite"]
    first = _paused("tokenmill.shards.export:_write_arrow_stream", *argv)
    try:
        second = hk.cli(*argv, "--seq-len", "8")
    finally:
        code, err = _resume(first)
    assert second.returncode == 1 and f"in use by another tokenmill run (pid {first.pid})" in second.stderr, \
        second.stdout + second.stderr
    assert code == 0, err
    assert len(datasets.load_from_disk(str(target))) == 30  # the first run's export, whole (not 8-token windows)


def test_a_second_quality_train_onto_a_busy_model_is_refused_naming_the_first(tmp_path):
    pytest.importorskip("fasttext")
    pos, neg = hk.docs(tmp_path / "pos.jsonl", 20), hk.docs(tmp_path / "neg.jsonl", 20, start=100)
    model = tmp_path / "model"
    argv = ["quality", "train", "--positive", pos, "--negative", neg, "--out", model, "--overwrite", "--workers", "1"]
    first = _paused("tokenmill.curate.quality.train:train_quality", *argv)
    try:
        second = hk.cli(*argv)
    finally:
        code, err = _resume(first)
    assert second.returncode == 1 and f"in use by another tokenmill run (pid {first.pid})" in second.stderr, \
        second.stdout + second.stderr
    assert code == 0, err
    assert (model / "model.bin").is_file() and (model / "model.bin.card.json").is_file()


# ---- 6. kill -9 while tokenmill writes its own state -------------------------------------------------------

@pytest.mark.parametrize("name", ["job.json", "written.json"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_run_killed_while_writing_its_state_leaves_an_out_it_can_take_again(name, overwrite, tmp_path):
    data = hk.docs(tmp_path / "in" / "docs.jsonl", 6)
    out = tmp_path / "out"
    argv = ["pretrain", data, "--out", out, "--tokenizer", "default", "--workers", "1", "--no-progress"]
    killed = _python(KILLED_AT_WRITE, name, *argv)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (out / "_state" / f"{name}.tmp").is_file()
    again = hk.cli(*argv, *(["--overwrite"] if overwrite else []))
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "manifest.json").read_text())["counts"]["kept"] == 6
    assert not [p for p in (out / "_state").iterdir() if p.name.endswith(".tmp")]


# ---- an s3:// input -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["export", "audit", "stats"])
def test_an_s3_input_is_reported_as_an_input(command, tmp_path):
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'tokenmill[s3]')")
    moto_server = pytest.importorskip("moto.moto_server.threaded_moto_server", reason="moto[server] is not installed")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
        extra = {"export": ["--to", "bin", "--out", tmp_path / "flat"], "audit": [], "stats": []}[command]
        result = subprocess.run([sys.executable, "-m", "tokenmill.cli", command, "s3://no-such-bucket/shards",
                                 *map(str, extra)], capture_output=True, text=True, timeout=120, env=env)
    finally:
        server.stop()
    assert result.returncode == 1, result.stdout + result.stderr
    assert "--out" not in result.stderr and "input s3://no-such-bucket/shards" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
