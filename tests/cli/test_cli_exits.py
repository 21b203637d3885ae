"""Exit statuses (usage 2, data or configuration 1), a closed pipe, and the tokenizer named in every summary."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tokenmill.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))
import trackkit as tk


@pytest.fixture
def docs(tmp_path) -> Path:
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 20)
    return src


def test_usage_errors_exit_2(tmp_path, docs, capsys):
    assert main(["pretrain", str(docs)]) == 2  # no --out
    assert "missing out" in capsys.readouterr().err
    assert main(["pretrain", str(docs), "--out", str(tmp_path / "o"), "--workers", "0"]) == 2
    assert "command line: workers" in capsys.readouterr().err
    assert main(["pretrain", "--bogus"]) == 2  # an unknown option: named, with the closest known one
    assert "`tokenmill pretrain` does not take --bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse's own: a value of the wrong type
        main(["pretrain", "x", "--workers", "two"])
    assert exc.value.code == 2


def test_data_and_configuration_errors_exit_1(tmp_path, docs, capsys):
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text("workers: -1\n")
    assert main(["pretrain", str(docs), "--out", str(tmp_path / "o"), "--config", str(cfg)]) == 1
    chats = tmp_path / "chats.jsonl"
    tk.write_chats(chats, 5)
    assert main(["pretrain", str(chats), "--out", str(tmp_path / "p"), "--no-progress"]) == 1  # routing
    assert "refusing" in capsys.readouterr().err
    assert main(["stats", str(tmp_path / "absent")]) == 1  # no shards there
    assert main(["inspect", str(tmp_path / "absent.jsonl")]) == 1


def test_summary_names_the_tokenizer_and_warns_when_none_was_given(tmp_path, docs, capsys):
    assert main(["pretrain", str(docs), "--out", str(tmp_path / "a"), "--workers", "1", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "tokenizer: cl100k_im (vocab 100," in out and "embedded" in out
    assert "no --tokenizer given" in err and "wrong ids" in err
    assert main(["pretrain", str(docs), "--out", str(tmp_path / "b"), "--workers", "1", "--no-progress",
                 "--tokenizer", "default"]) == 0
    out, err = capsys.readouterr()
    assert "tokenizer: cl100k_im" in out and "no --tokenizer given" not in err


def test_a_closed_pipe_ends_quietly(tmp_path):
    for i in range(200):  # more JSON than a pipe buffer holds
        tk.write_docs(tmp_path / f"part-{i:02d}.jsonl", 3, seed=i)
    script = textwrap.dedent(f"""
        import subprocess, sys
        cmd = [sys.executable, "-m", "tokenmill.cli", "inspect", "--json", {str(tmp_path)!r}]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.read(100)
        p.stdout.close()   # what `| head -c 100` does
        err = p.stderr.read().decode()
        print(p.wait()); print(err)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    code, _, err = done.stdout.partition("\n")
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert int(code) == 141


def test_exit_statuses_are_documented():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "Exit status" in readme and "`2`" in readme and "`1`" in readme and "141" in readme


def test_json_outputs_still_parse(tmp_path, docs, capsys):
    assert main(["inspect", "--json", str(docs)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["kind"] == "pretrain"


@pytest.mark.parametrize(("argv", "said"), [
    (["pretrain", "x.jsonl", "--output", "o"], "`tokenmill pretrain` does not take --output (did you mean --out?)"),
    (["sft", "select", "x.jsonl", "--n", "3", "--out", "o", "--limt", "3"],
     "`tokenmill sft select` does not take --limt (did you mean --limit?)"),
    (["curate", "x.jsonl", "--out", "o", "--zzz"], "`tokenmill curate` does not take --zzz\n"),
])
def test_an_unknown_option_is_a_usage_error_naming_the_closest_one(argv, said, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "run `tokenmill" in err
