"""`tokenmill quality train` as a job of the one driver: the same model bytes as the library call, the envelope
and data card every job writes, a dry run that writes nothing."""

import json
import random

import pytest

from tokenmill.cli import main
from tokenmill.curate.quality.classifier import train_quality

ENVELOPE = {"tokenmill", "track", "inputs", "config", "counts", "identity", "run", "rejects_file", "skipped_inputs"}
GOOD = "the anatomy of the heart muscle blood vessel tissue cell organ".split()
SPAM = "buy cheap click here free offer deal now best price win".split()


def _texts(words, n, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(30)) for _ in range(n)]


def _write(path, texts):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts) + json.dumps({"text": ""}) + "\n")
    return str(path)


def test_the_job_writes_the_model_bytes_of_the_library_call_with_envelope_and_card(tmp_path, capsys):
    pytest.importorskip("fasttext")
    from huggingface_hub import DatasetCard

    pos, neg = _texts(GOOD, 50, 1), _texts(SPAM, 50, 2)
    p, n = _write(tmp_path / "in" / "pos.jsonl", pos), _write(tmp_path / "in" / "neg.jsonl", neg)
    train_quality(pos, neg, out=tmp_path / "direct.bin", params={"epoch": 3})
    out = tmp_path / "out"
    argv = ["quality", "train", "--positive", p, "--negative", n, "--param", "epoch=3", "--out", str(out)]
    assert main([*argv, "--workers", "2", "--unit-bytes", "2000", "--no-progress"]) == 0, capsys.readouterr().err
    assert (out / "model.bin").read_bytes() == (tmp_path / "direct.bin").read_bytes()  # units and workers change nothing
    manifest = json.loads((out / "manifest.json").read_text())
    assert ENVELOPE <= set(manifest) and manifest["track"] == "quality train"
    assert manifest["counts"]["input"] == 102 and manifest["rejects_file"] == "rejects.jsonl"
    assert manifest["quality_model"]["data"]["unusable_by_reason"] == {"empty_text": 2}
    assert DatasetCard.load(out / "datacard.md").content and json.loads((out / "datacard.json").read_text())
    assert not (out / "_work").exists()  # the read stage's parts are dropped once the fit has run


def test_a_dry_run_writes_nothing_and_a_user_folder_is_refused(tmp_path, capsys):
    pytest.importorskip("fasttext")
    p, n = _write(tmp_path / "in" / "pos.jsonl", _texts(GOOD, 10, 3)), _write(tmp_path / "in" / "neg.jsonl", _texts(SPAM, 10, 4))
    argv = ["quality", "train", "--positive", p, "--negative", n, "--out"]
    assert main([*argv, str(tmp_path / "dry"), "--dry-run"]) == 0
    assert "pos.jsonl" in capsys.readouterr().out and not (tmp_path / "dry").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    assert main([*argv, str(mine), "--overwrite"]) == 1
    assert "choose another --out" in capsys.readouterr().err and [f.name for f in mine.iterdir()] == ["keep.txt"]


def test_a_file_in_both_sets_and_a_flag_it_does_not_take_are_refused(tmp_path, capsys):
    p = _write(tmp_path / "in" / "pos.jsonl", _texts(GOOD, 10, 5))
    assert main(["quality", "train", "--positive", p, "--negative", p, "--out", str(tmp_path / "o")]) == 1
    assert "is in --positive and in --negative" in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert main(["quality", "train", "--positive", p, "--negative", p, "--out", str(tmp_path / "o"), "--force"]) == 2
    assert "no input is routed away" in capsys.readouterr().err
