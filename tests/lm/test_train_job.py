"""``tokenmill lm train`` as a Job of the one driver: the job flags, the guard, the same bytes at any worker
count and after a kill -9, the manifest envelope and the data card, and bad input refused before any work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lmkit import synthetic_docs, write_jsonl

import statekit
from tokenmill.cli import main
from tokenmill.errors import ConfigError
from tokenmill.job.options import JobOptions
from tokenmill.lm.train import LmSettings, train

MODEL_FILES = ("model.arpa", "model.tmlm")


def _ref(tmp_path: Path, n: int = 400) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return write_jsonl(tmp_path / "ref.jsonl", synthetic_docs(n))


def _bytes(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in MODEL_FILES}


def test_cli_writes_the_model_manifest_and_card(tmp_path, capsys):
    ref = _ref(tmp_path)
    out = tmp_path / "lm"
    assert main(["lm", "train", "--text", str(ref), "--out", str(out), "--order", "4", "--language", "en",
                 "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "lm train: 400 documents" in said and "4-grams" in said
    m = json.loads((out / "manifest.json").read_text())
    assert m["track"] == "lm train" and m["counts"]["input"] == 400 and m["counts"]["balanced"]
    assert m["model"]["order"] == 4 and m["model"]["language"] == "en" and len(m["model"]["ngrams"]) == 4
    assert m["config"]["lm"]["normalization"]["digits"] == "0"
    assert m["outputs"] == list(MODEL_FILES)
    assert (out / "datacard.md").is_file()
    assert not (out / "_work").exists()  # the counts are dropped once the model is built
    assert (out / "model.arpa").read_text().startswith("\\data\\\nngram 1=")


def test_same_bytes_at_any_worker_count_and_unit_size(tmp_path):
    ref = _ref(tmp_path)
    one = tmp_path / "one"
    many = tmp_path / "many"
    train([str(ref)], out=one, options=JobOptions(workers=1, no_progress=True))
    m = train([str(ref)], out=many, options=JobOptions(workers=2, unit_bytes=5_000, no_progress=True))
    assert m["run"]["units"] > 4
    assert _bytes(one) == _bytes(many)


def test_a_run_killed_mid_count_resumes_to_the_same_bytes(tmp_path):
    ref = write_jsonl(tmp_path / "ref.jsonl", synthetic_docs(6000))
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    argv = [sys.executable, "-m", "tokenmill.cli", "lm", "train", "--text", str(ref), "--unit-bytes", "20000",
            "--workers", "1", "--no-progress", "--out"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([*argv, str(killed)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = killed / "_state" / "lm_count_v1" / "done"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and statekit.count(done) < 2 and proc.poll() is None:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "manifest.json").exists()  # killed before the end
    assert subprocess.run([*argv, str(killed)], env=env, capture_output=True).returncode == 0
    assert subprocess.run([*argv, str(clean)], env=env, capture_output=True).returncode == 0
    assert _bytes(killed) == _bytes(clean)


def test_dry_run_writes_nothing_and_limit_reads_the_first_records(tmp_path):
    ref = _ref(tmp_path)
    plan = train([str(ref)], out=tmp_path / "dry", options=JobOptions(dry_run=True))
    assert not (tmp_path / "dry").exists() and plan["model"]["order"] == 5
    m = train([str(ref)], out=tmp_path / "few", options=JobOptions(limit=50, no_progress=True))
    assert m["counts"]["input"] == 50 and m["config"]["limit"] == 50


def test_another_commands_output_is_not_overwritten(tmp_path, capsys):
    ref = _ref(tmp_path)
    out = tmp_path / "out"
    assert main(["curate", str(ref), "--out", str(out), "--preset", "none", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["lm", "train", "--text", str(ref), "--out", str(out), "--no-progress"]) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert not (out / "model.arpa").exists()


def _one_line_error(capsys, argv: list[str]) -> str:
    """The one problem, on one line (a ConfigError's header line, then its problem), no traceback."""
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) <= 2 and "Traceback" not in err
    return err


def test_an_empty_reference_is_refused_before_any_work(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    err = _one_line_error(capsys, ["lm", "train", "--text", str(empty), "--out", str(tmp_path / "lm")])
    assert "empty" in err and "--text" in err
    assert not (tmp_path / "lm").exists()


def test_a_reference_of_only_whitespace_says_so(tmp_path, capsys):
    blank = write_jsonl(tmp_path / "blank.jsonl", ["   ", "\n\n", "\t"])
    err = _one_line_error(capsys, ["lm", "train", "--text", str(blank), "--out", str(tmp_path / "lm")])
    assert "no words" in err and "--text" in err


@pytest.mark.parametrize("flags, says", [(["--order", "0"], "--order 0"), (["--order", "9"], "--order 9"),
                                         (["--prune", "1", "1"], "unigrams are never pruned"),
                                         (["--language", "english!"], "--language")])
def test_bad_settings_are_one_line_errors(tmp_path, capsys, flags, says):
    ref = _ref(tmp_path, 5)
    err = _one_line_error(capsys, ["lm", "train", "--text", str(ref), "--out", str(tmp_path / "lm"), *flags])
    assert says in err
    assert not (tmp_path / "lm").exists()


def test_settings_are_checked_from_python_too():
    with pytest.raises(ConfigError, match="--order"):
        LmSettings(order=0)


def test_sft_conversations_are_not_reference_text(tmp_path, capsys):
    chats = tmp_path / "chats.jsonl"
    chats.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"hi {i}"},
                                                      {"role": "assistant", "content": "hello"}]}) + "\n"
                             for i in range(20)))
    assert main(["lm", "train", "--text", str(chats), "--out", str(tmp_path / "lm")]) == 1
    assert "sft" in capsys.readouterr().err.lower()


def test_parquet_and_plain_text_references_give_the_model_their_jsonl_gives(tmp_path):
    """The reference is read as `pretrain` reads documents: the same documents in Parquet, or one per line of
    plain text, make the same model bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = [d.replace("\n", " ") for d in synthetic_docs(200)]
    jsonl = write_jsonl(tmp_path / "ref.jsonl", docs)
    pq.write_table(pa.table({"text": docs}), tmp_path / "ref.parquet")
    (tmp_path / "ref.txt").write_text("\n".join(docs) + "\n")
    models = []
    for name, mode in (("jsonl", "auto"), ("parquet", "auto"), ("txt", "line")):
        src = jsonl if name == "jsonl" else tmp_path / f"ref.{name}"
        out = tmp_path / f"lm-{name}"
        train([str(src)], out=out, options=JobOptions(text_mode=mode, no_progress=True))
        models.append(_bytes(out))
    assert models[0] == models[1] == models[2]
