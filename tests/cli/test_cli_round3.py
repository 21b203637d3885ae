"""New-user traps of the round-2 commands: plain help, one-line errors instead of tracebacks, both orders of
``decontaminate``'s ``--eval ... --`` form, and the silent no-ops that are errors."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from tokenmill.cli import build_parser, main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))
import trackkit as tk


def _parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_help_text_is_plain_text():
    for p in _parsers(build_parser()):
        text = p.format_help()
        assert "``" not in text and ":func:" not in text and ":class:" not in text, p.prog


@pytest.fixture
def docs(tmp_path) -> Path:
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 30)
    return src


def _evals(tmp_path, items: list[dict]) -> Path:
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in items))
    return path


ITEM = {"question": "Natalia sold clips to forty eight of her friends in April and then half as many in May",
        "answer": "72"}


@pytest.mark.parametrize("order", ["inputs-after-dashes", "options-after-dashes", "inputs-first"])
def test_decontaminate_takes_the_eval_list_ended_by_dashes(tmp_path, docs, order, capsys):
    ev, out = _evals(tmp_path, [ITEM]), tmp_path / "o"
    argv = {
        "inputs-after-dashes": ["--eval", ev, "--", docs, "--out", out],
        "options-after-dashes": ["--out", out, "--eval", ev, "--", docs],
        "inputs-first": [docs, "--eval", ev, "--", "--out", out],
    }[order]
    assert main(["decontaminate", *map(str, argv), "--no-progress", "--workers", "1"]) == 0, capsys.readouterr().err
    report = json.loads((out / "decontamination.json").read_text())
    assert report["documents"] == 30 and report["benchmarks"][0]["items"] == 1


def test_decontaminate_with_an_empty_eval_file_is_an_error(tmp_path, docs, capsys):
    ev = tmp_path / "empty.jsonl"
    ev.write_text("\n")
    code = main(["decontaminate", str(docs), "--eval", str(ev), "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "holds no items" in err and "empty.jsonl" in err and "Traceback" not in err
    assert not (tmp_path / "o" / "documents").exists()  # refused before any work


def _labelled(tmp_path) -> Path:
    path = tmp_path / "labelled.jsonl"
    rows = [{"text": f"document number {i} " * 5, "label": i % 2} for i in range(40)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_quality_train_names_a_missing_label_column(tmp_path, capsys):
    code = main(["quality", "train", "--labelled", str(_labelled(tmp_path)), "--label-field", "nolabel",
                 "--out", str(tmp_path / "m.bin")])
    err = capsys.readouterr().err
    assert code == 1 and "'nolabel'" in err and "label" in err.split("'nolabel'")[1], err


def test_quality_train_refuses_a_bad_fasttext_parameter_in_one_line(tmp_path, capsys):
    pytest.importorskip("fasttext")
    code = main(["quality", "train", "--labelled", str(_labelled(tmp_path)), "--label-field", "label",
                 "--param", "epoch=abc", "--out", str(tmp_path / "m.bin")])
    err = capsys.readouterr().err
    assert code in (1, 2) and "epoch" in err and "Traceback" not in err, err
    code = main(["quality", "train", "--labelled", str(_labelled(tmp_path)), "--label-field", "label",
                 "--param", "bogus=3", "--out", str(tmp_path / "m.bin")])
    err = capsys.readouterr().err
    assert code in (1, 2) and "bogus" in err, err


SYNTH = ["synth", "rephrase", "in.jsonl", "--server", "http://127.0.0.1:9", "--model", "m"]


@pytest.mark.parametrize("flags, words", [
    (["--retries", "-1"], "--retries"),
    (["--timeout", "0"], "--timeout"),
    (["--concurrency", "0"], "--concurrency"),
])
def test_synth_refuses_bad_numbers_up_front(tmp_path, flags, words, capsys):
    code = main([*SYNTH, "--out", str(tmp_path / "o"), *flags])
    err = capsys.readouterr().err
    assert code == 2 and words in err and "cannot reach" not in err, err


def test_synth_refuses_a_cache_dir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    code = main([*SYNTH, "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "afile")])
    err = capsys.readouterr().err
    assert code == 2 and "--cache-dir" in err and "not a directory" in err, err


def test_export_bin_into_an_existing_directory_is_a_one_line_error(tmp_path, docs, capsys):
    shards = tmp_path / "shards"
    assert main(["pretrain", str(docs), "--out", str(shards), "--workers", "1", "--no-progress",
                 "--tokenizer", "default"]) == 0
    (tmp_path / "target").mkdir()
    capsys.readouterr()
    for to in ("bin", "megatron"):
        target = tmp_path / "target" if to == "bin" else tmp_path / "prefix"
        if to == "megatron":
            (tmp_path / "prefix.bin").mkdir()
        code = main(["export", str(shards), "--to", to, "--out", str(target)])
        err = capsys.readouterr().err
        assert code == 1 and "is a directory" in err and "Traceback" not in err, (to, err)


def test_export_hf_prints_no_progress_bars_of_datasets(tmp_path, docs, capfd):
    pytest.importorskip("datasets")
    shards = tmp_path / "shards"
    assert main(["pretrain", str(docs), "--out", str(shards), "--workers", "1", "--no-progress",
                 "--tokenizer", "default"]) == 0
    capfd.readouterr()
    assert main(["export", str(shards), "--to", "hf", "--out", str(tmp_path / "hf")]) == 0
    out, err = capfd.readouterr()
    assert "Saving the dataset" not in err + out and "examples/s" not in err + out, err
    assert "exported" in out


def test_quality_train_reports_class_balance_and_warns_on_imbalance(tmp_path, capsys):
    pytest.importorskip("fasttext")
    pos, neg = tmp_path / "pos.jsonl", tmp_path / "neg.jsonl"
    pos.write_text("".join(json.dumps({"text": f"careful prose about topic {i} " * 8}) + "\n" for i in range(44)))
    neg.write_text("".join(json.dumps({"text": f"buy now cheap {i} " * 8}) + "\n" for i in range(4)))
    fast = ["--param", "quantize=0"]  # the full model: quantising is test_quality.py's subject, and costs seconds
    code = main(["quality", "train", "--positive", str(pos), "--negative", str(neg), *fast, "--out", str(tmp_path / "m")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "class balance: 44 positive, 4 negative documents (11.0 : 1)" in out, out
    assert "warning: the classes are imbalanced (11.0 : 1" in err, err
    card = json.loads((tmp_path / "m" / "model.bin.card.json").read_text())
    held = card["scores"]["heldout_examples"]
    assert f"held-out split: {held['positive']} positive and {held['negative']} negative examples" in out, out
    assert card["scores"]["balance"]["documents"] == {"positive": 44, "negative": 4}
    neg.write_text("".join(json.dumps({"text": f"buy now cheap {i} " * 8}) + "\n" for i in range(40)))
    assert main(["quality", "train", "--positive", str(pos), "--negative", str(neg), *fast, "--out",
                 str(tmp_path / "m2")]) == 0
    out, err = capsys.readouterr()
    assert "class balance: 44 positive, 40 negative documents (1.1 : 1)" in out and "imbalanced" not in err


def test_an_s3_input_without_credentials_is_a_one_line_error(tmp_path):
    pytest.importorskip("s3fs")
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(tmp_path / "none"),
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "HOME": str(tmp_path)})
    result = subprocess.run([sys.executable, "-m", "tokenmill.cli", "pretrain", "s3://some-bucket/docs.jsonl", "--out",
                             str(tmp_path / "o"), "--no-progress", "--tokenizer", "default"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "s3://some-bucket/docs.jsonl" in result.stderr and "credentials" in result.stderr
