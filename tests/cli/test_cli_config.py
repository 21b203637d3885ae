"""The YAML pipeline file: every problem at once with its path, a valid file runs, flags override it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))
import trackkit as tk  # noqa: E402

from tokenmill.cli import main  # noqa: E402

BAD = """\
track: pretrian
inputs: 5
workers: -1
unit_bytes: lots
colour: red
sft:
  train_on: everything
  max_lenght: 10
steps:
  - {min_chars: 3}
"""


def test_every_problem_is_reported_at_once_with_its_path(tmp_path, capsys):
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text(BAD)
    assert main(["pretrain", "--config", str(cfg)]) == 1  # a configuration error
    err = capsys.readouterr().err
    expected = ["track:", "inputs:", "workers:", "unit_bytes:", "colour: unknown key", "sft.train_on:",
                "sft.max_lenght: unknown key (did you mean 'max_length'?)", "steps[0]:"]
    for where in expected:
        assert f"{cfg}: {where}" in err, where
    assert f"({len(expected)} problem(s))" in err
    assert "Traceback" not in err


def test_bad_steps_are_reported_together_with_their_path(tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 5)
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text("steps:\n  - {name: length, min_chars: abc}\n  - {name: length, bogus: 1}\n  - {name: nope}\n")
    assert main(["pretrain", str(src), "--out", str(tmp_path / "out"), "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "(3 problem(s))" in err
    assert f"{cfg}: steps[0]: min_chars" in err and f"{cfg}: steps[1]:" in err and "bogus" in err
    assert f"{cfg}: steps[2].name: unknown step 'nope'" in err
    assert not (tmp_path / "out").exists()


def test_a_mistyped_step_or_parameter_names_what_was_meant(tmp_path, capsys):
    """Not Python's ``__init__() got an unexpected keyword argument``: the step's parameters, a close name."""
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 5)
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text("steps:\n  - {name: length, min_char: 60}\n  - {name: lenght}\n")
    assert main(["pretrain", str(src), "--out", str(tmp_path / "out"), "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "__init__" not in err and "keyword argument" not in err, err
    assert (f"{cfg}: steps[0]: unknown parameter 'min_char' of step 'length' (did you mean 'min_chars'?); "
            "its parameters: min_chars, max_chars") in err, err
    assert f"{cfg}: steps[1].name: unknown step 'lenght' (did you mean 'length'?)" in err, err


def test_not_yaml_and_missing_file_are_clean_errors(tmp_path, capsys):
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text("inputs: [unclosed\n")
    assert main(["pretrain", "--config", str(cfg)]) == 1
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["pretrain", "--config", str(tmp_path / "absent.yaml")]) == 1
    assert "cannot read the pipeline file" in capsys.readouterr().err


def test_missing_inputs_and_out_are_named(capsys):
    assert main(["pretrain"]) == 2  # a usage error
    err = capsys.readouterr().err
    assert "missing inputs and out" in err and "tokenmill pretrain -h" in err


def write_pipeline(tmp_path: Path, body: dict) -> Path:
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text(json.dumps(body))  # JSON is YAML
    return cfg


def test_a_valid_pipeline_runs_and_flags_override_it(tmp_path):
    src = tmp_path / "docs.jsonl"
    texts = tk.write_docs(src, 60)
    cfg = write_pipeline(tmp_path, {
        "track": "pretrain", "inputs": [str(src)], "out": str(tmp_path / "from-file"), "workers": 1,
        "unit_bytes": "1KiB", "steps": [{"name": "length", "min_chars": 100}],
    })
    assert main(["pretrain", "--config", str(cfg), "--no-progress"]) == 0
    m = json.loads((tmp_path / "from-file" / "manifest.json").read_text())
    assert m["config"]["unit_bytes"] == 1024
    assert m["config"]["steps"] == [{"name": "length", "min_chars": 100}]
    short = sum(1 for t in texts if len(t) < 100)
    assert 0 < short < len(texts)
    assert m["counts"]["filtered"] == {"length_v1:too_short": short}
    assert m["counts"]["kept"] == len(texts) - short
    assert m["run"]["units"] > 1

    assert main(["pretrain", "--config", str(cfg), "--out", str(tmp_path / "from-flag"), "--unit-bytes", "64KB",
                 "--no-progress"]) == 0
    m = json.loads((tmp_path / "from-flag" / "manifest.json").read_text())
    assert m["config"]["unit_bytes"] == 64000 and m["run"]["units"] == 1
    assert m["counts"]["kept"] == len(texts) - short  # the file's steps still apply


def test_sft_options_from_the_file_and_flags(tmp_path):
    src = tmp_path / "chats.jsonl"
    tk.write_chats(src, 12)
    cfg = write_pipeline(tmp_path, {"inputs": str(src), "out": str(tmp_path / "a"), "workers": 1,
                                    "sft": {"train_on": "last", "verify": 0, "max_length": 4096}})
    assert main(["sft", "--config", str(cfg), "--no-progress"]) == 0
    sft = json.loads((tmp_path / "a" / "manifest.json").read_text())["config"]["sft"]
    assert sft["train_on"] == "last" and sft["verify"] == 0 and sft["max_length"] == 4096
    assert main(["sft", "--config", str(cfg), "--out", str(tmp_path / "b"), "--train-on", "all",
                 "--no-progress"]) == 0
    sft = json.loads((tmp_path / "b" / "manifest.json").read_text())["config"]["sft"]
    assert sft["train_on"] == "all" and sft["verify"] == 0


@pytest.mark.parametrize("flag, value", [("--unit-bytes", "lots"), ("--workers", "0")])
def test_bad_flags_are_clean_errors(tmp_path, capsys, flag, value):
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 3)
    code = main(["pretrain", str(src), "--out", str(tmp_path / "out"), flag, value])
    assert code == 2
    assert "Traceback" not in capsys.readouterr().err
