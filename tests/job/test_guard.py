"""The job driver's guard, over every command that takes ``--out``: a folder tokenmill did not write is
refused (with and without ``--overwrite``), an input inside ``--out`` is refused, another workflow's
output is refused, and ``--overwrite`` removes only what tokenmill wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenmill.cli import main


def _docs(path: Path, n: int = 6) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"document {i} " + " ".join(f"w{i}x{k}" for k in range(30))})
                            + "\n" for i in range(n)))
    return path


def _chats(path: Path, n: int = 4) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"question {i}?"},
                                                     {"role": "assistant", "content": f"answer {i}."}]}) + "\n"
                            for i in range(n)))
    return path


def _eval(path: Path) -> Path:
    path.write_text(json.dumps({"question": "what is the capital of a country that does not exist anywhere at all",
                                "answer": "none"}) + "\n")
    return path


# every command that writes a directory, as argv after the inputs and --out
COMMANDS = {
    "pretrain": lambda t: ["pretrain", str(_docs(t / "in" / "docs.jsonl")), "--tokenizer", "default", "--workers", "1"],
    "sft": lambda t: ["sft", str(_chats(t / "in" / "chats.jsonl")), "--tokenizer", "default", "--workers", "1",
                      "--verify", "0"],
    "curate": lambda t: ["curate", str(_docs(t / "in" / "docs.jsonl")), "--preset", "none", "--workers", "1"],
    "decontaminate": lambda t: ["decontaminate", str(_docs(t / "in" / "docs.jsonl")), "--eval",
                                str(_eval(t / "eval.jsonl")), "--workers", "1"],
    "sft select": lambda t: ["sft", "select", str(_chats(t / "in" / "chats.jsonl")), "--n", "2"],
    "synth rephrase": lambda t: ["synth", "rephrase", str(_docs(t / "in" / "docs.jsonl")), "--server",
                                 "http://127.0.0.1:9", "--model", "m"],
    "demo": lambda t: ["demo"],
}


def _run(argv: list[str], out: Path, *extra: str) -> int:
    return main([*argv, "--out", str(out), *(["--no-progress"] if argv[0] in ("pretrain", "sft", "curate",
                                                                                "decontaminate") and argv[1] != "select"
                                               else []), *extra])


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_tokenmill_did_not_write_is_refused(command, overwrite, tmp_path, capsys):
    if command == "demo" and overwrite:
        pytest.skip("demo has no --overwrite: it replaces only its own earlier output")
    argv = COMMANDS[command](tmp_path)
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    code = _run(argv, out, *(["--overwrite"] if overwrite else []))
    err = capsys.readouterr().err
    assert code == 1, err
    assert "not a tokenmill output" in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]  # not even a lock file
    assert (out / "thesis.tex").read_text() == "years of work"


@pytest.mark.parametrize("command", sorted(c for c in COMMANDS if c != "demo"))
def test_an_input_inside_out_is_refused_and_kept(command, tmp_path, capsys):
    argv = COMMANDS[command](tmp_path)
    code = _run(argv, tmp_path / "in", "--overwrite")
    err = capsys.readouterr().err
    assert code == 1 and "holds the input" in err, err
    assert all(p.stat().st_size > 0 for p in (tmp_path / "in").iterdir())


def test_the_issue_commands_keep_the_folder_its_input_and_notes(tmp_path, capsys):
    precious = tmp_path / "precious"
    _docs(precious / "data.jsonl")
    (precious / "notes.txt").write_text("keep")
    for argv in (["curate", str(precious / "data.jsonl"), "--preset", "fineweb"],
                 ["decontaminate", str(precious / "data.jsonl"), "--eval", str(_eval(tmp_path / "e.jsonl"))]):
        assert main([*argv, "--out", str(precious), "--overwrite", "--no-progress"]) == 1
        assert "holds the input" in capsys.readouterr().err
        assert (precious / "notes.txt").read_text() == "keep" and (precious / "data.jsonl").stat().st_size > 0


@pytest.mark.parametrize("first,second", [("curate", "pretrain"), ("pretrain", "curate"), ("sft", "pretrain"),
                                          ("curate", "decontaminate")])
def test_another_workflows_output_is_refused_without_overwrite(first, second, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run(COMMANDS[first](tmp_path), out) == 0
    before = (out / "manifest.json").read_bytes()
    assert _run(COMMANDS[second](tmp_path), out) == 1
    err = capsys.readouterr().err
    assert f"holds the output of `tokenmill {first}`" in err, err
    assert (out / "manifest.json").read_bytes() == before


@pytest.mark.parametrize("command", ["pretrain", "sft", "curate", "decontaminate", "sft select"])
def test_overwrite_removes_only_what_tokenmill_wrote(command, tmp_path, capsys):
    argv = COMMANDS[command](tmp_path)
    out = tmp_path / "out"
    assert _run(argv, out) == 0
    (out / "README.txt").write_text("mine")
    (out / "notes").mkdir()
    (out / "notes" / "a.txt").write_text("mine too")
    assert _run(argv, out) == 0  # a resume of the same run
    assert _run(argv, out, "--overwrite") == 0
    assert (out / "README.txt").read_text() == "mine" and (out / "notes" / "a.txt").read_text() == "mine too"
    assert json.loads((out / "_state" / "job.json").read_text())["workflow"] == command


def test_demo_reruns_into_its_own_output_and_keeps_a_users_file(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    (out / "my-notes.txt").write_text("mine")
    assert main(["demo", "--out", str(out)]) == 0
    assert (out / "my-notes.txt").read_text() == "mine"
    assert (out / "pretrain" / "manifest.json").is_file()


@pytest.mark.parametrize("to", ["hf", "bin", "megatron"])
def test_export_never_writes_over_what_it_did_not_write(to, tmp_path, capsys):
    if to == "hf":
        pytest.importorskip("datasets")
    shards = tmp_path / "shards"
    assert _run(COMMANDS["pretrain"](tmp_path), shards) == 0
    target = tmp_path / "export"
    target.mkdir()
    (target / "mine.txt").write_text("mine")
    if to != "megatron":  # megatron's --out is a prefix: PREFIX.bin and PREFIX.idx beside the directory
        argv = ["export", str(shards), "--to", to, "--out", str(target)]
        assert main(argv) == 1 and main([*argv, "--overwrite"]) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err and ("not empty" in err or "is a directory" in err), err
        assert sorted(p.name for p in target.iterdir()) == ["mine.txt"]
    fresh = tmp_path / ("hfout" if to == "hf" else "flat")
    argv = ["export", str(shards), "--to", to, "--out", str(fresh)]
    assert main(argv) == 0
    assert main(argv) == 1 and "--overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    if to != "hf":
        foreign = tmp_path / "foreign"
        Path(f"{foreign}.bin" if to == "megatron" else foreign).write_bytes(b"not ours")
        assert main(["export", str(shards), "--to", to, "--out", str(foreign), "--overwrite"]) == 1
        assert "not a" in capsys.readouterr().err
        assert Path(f"{foreign}.bin" if to == "megatron" else foreign).read_bytes() == b"not ours"


def test_quality_train_never_writes_over_a_file_it_did_not_write(tmp_path, capsys):
    pytest.importorskip("fasttext")
    model = tmp_path / "model.bin"
    model.write_bytes(b"someone's model")
    pos, neg = _docs(tmp_path / "in" / "pos.jsonl", 20), _docs(tmp_path / "in" / "neg.jsonl", 20)
    argv = ["quality", "train", "--positive", str(pos), "--negative", str(neg), "--out"]
    assert main([*argv, str(model), "--overwrite"]) == 1
    assert "is a file, not a directory" in capsys.readouterr().err
    assert model.read_bytes() == b"someone's model"
    mine = tmp_path / "mine"  # a user's folder: refused with or without --overwrite, its file kept
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        assert main([*argv, str(mine), *extra]) == 1
        assert "tokenmill writes only into a new or empty directory or one it wrote" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "mine"
    assert main([*argv, str(tmp_path / "in")]) == 1  # the folder of the inputs
    assert "Traceback" not in capsys.readouterr().err
