"""Options are declared once, in each command's options class: its flags, the pipeline file's keys and what
``validate`` accepts are derived from it, so the command line, the file and ``validate`` cannot disagree."""

from __future__ import annotations

import argparse
import shutil
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from tokenmill.check import check_pipeline
from tokenmill.cli import build_parser, main
from tokenmill.config import SFT, TOP
from tokenmill.job.options import COMMAND_OPTIONS, STRUCTURE, Options, file_keys, file_rules, spelled
from tokenmill.sft.options import SftOptions

# one valid value per file key (what the file would hold)
VALUES = {"workers": 1, "force": True, "overwrite": False, "unit_bytes": "4MiB", "text_mode": "line",
          "exclude": ["*.gz"], "skip_misrouted": True, "limit": 5, "preset": "gopher", "robots_snapshot": "robots/",
          "tokenizer": "default", "shard_tokens": 1000, "val_fraction": 0.1, "val_count": 3, "val_seed": 1,
          "eos": "<|endoftext|>", "quality_model": "q.bin"}


def _subparser(command: str):
    parser = build_parser()
    return next(a for a in parser._subparsers._group_actions if a.dest == "command").choices[command]


@pytest.mark.parametrize("command", sorted(COMMAND_OPTIONS))
def test_every_field_is_one_flag_of_its_command(command):
    flags = {opt for a in _subparser(command)._actions for opt in a.option_strings}
    skipped = {"text_mode"} if command in ("sft", "pref") else set()  # they read records, never plain-text lines
    for f in fields(COMMAND_OPTIONS[command]):
        if f.name in skipped:
            continue
        spelled = f.metadata["flag"].cli or "--" + f.name.replace("_", "-")
        assert spelled in flags, f"{command}: {f.name} has no flag {spelled}"


def test_the_file_keys_are_the_classes_fields_and_the_structure():
    assert set(TOP) == set(file_keys()) | set(STRUCTURE)
    assert set(VALUES) == set(file_keys()), "a file key without a test value: add it to VALUES"


@pytest.mark.parametrize("command", sorted(COMMAND_OPTIONS))
@pytest.mark.parametrize("key", sorted(VALUES))
def test_validate_agrees_with_the_command_on_every_key(command, key, tmp_path):
    """``tokenmill validate`` finds a problem with ``key`` in a file for ``command`` exactly when ``tokenmill
    COMMAND --config`` refuses the file for it, and that is exactly when the key is not a field of the class."""
    import yaml

    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(yaml.safe_dump({"track": command, key: VALUES[key]}))
    problems, _ = check_pipeline(pipeline)
    flagged = any(p.split(": ", 2)[1] == key for p in problems if p.count(": ") >= 2)
    takes = key in file_rules(COMMAND_OPTIONS[command])
    assert flagged == (not takes), problems
    if not takes:  # the command refuses the same file, naming the key, before reading any input
        code = main([command, "--config", str(pipeline), "missing.jsonl", "--out", str(tmp_path / "o"), "--dry-run"])
        assert code == 1


# what a command's parser may hold besides its options classes' flags: what to read, where to write, where to run
STRUCTURAL = {"-h", "--help", "--version", "--out", "--config", "--engine", "--ray-address", "--work-dir",
              "--storage-option", "--from"}


def _subclasses(cls: type):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _flags(parser: argparse.ArgumentParser, command: str = ""):
    """(command, option string, dest) of every option of every subparser, nested ones (synth rephrase) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _flags(sub, f"{command} {name}".strip())
        for option in action.option_strings:
            yield command, option, action.dest


def test_every_flag_of_every_command_comes_from_an_options_class():
    """Each option string is the flag of a field of an options class (its spelling, its field as the dest), or
    one of the few structural arguments: an option declared by hand anywhere fails here."""
    flags = list(_flags(build_parser()))  # every command's parser: their modules define the classes
    declared = {(spelled(f), f.name) for cls in _subclasses(Options) for f in fields(cls)}
    commands = {c for c, _, _ in flags}
    assert {"sft", "pref", "decontaminate", "select", "sft-select", "synth rephrase", "synth distill", "lm train",
            "quality train", "inspect", "funnel", "export", "audit", "stats", "bench formats", "plan", "demo",
            "card"} <= commands
    by_hand = sorted(f"{c} {o}" for c, o, dest in flags
                     if (o, dest) not in declared and o not in STRUCTURAL)
    assert by_hand == []


def test_a_flag_declared_by_hand_is_caught():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["select"]
    sub.add_argument("--top-k", type=int)
    declared = {(spelled(f), f.name) for cls in _subclasses(Options) for f in fields(cls)}
    assert [o for c, o, d in _flags(parser) if c == "select" and (o, d) not in declared
            and o not in STRUCTURAL] == ["--top-k"]


# one valid and one invalid value of every key of the sft: section
SFT_GOOD = {"chat_template": "TEMPLATE", "max_length": 64, "train_reasoning": False, "reasoning_policy": "drop",
            "allow_untrained_stop": True, "date": "2024-02-29", "train_on": "last", "supervise_empty_think": True,
            "allow_consecutive": True, "verify": 0, "on_mismatch": "reject", "keep_unrendered_tools": True,
            "on_unsafe": "reject", "seq_len": 128}
SFT_BAD = {"chat_template": 3, "max_length": 0, "train_reasoning": "no", "reasoning_policy": "hide",
           "allow_untrained_stop": 1, "date": "29/02/2024", "train_on": "user", "supervise_empty_think": "yes",
           "allow_consecutive": "yes", "verify": -1, "on_mismatch": "ignore", "keep_unrendered_tools": "yes",
           "on_unsafe": "skip", "seq_len": 0, "max_lenght": 64}


def test_the_sft_section_is_the_sft_options_class():
    assert set(SFT) == {f.name for f in fields(SftOptions)} == set(SFT_GOOD)
    assert set(SFT_BAD) == set(SFT_GOOD) | {"max_lenght"}, "an sft: key without a bad test value: add it"


def _sft_file(tmp_path: Path, key: str, value) -> Path:
    template = tmp_path / "chatml.jinja"
    shutil.copy(Path(__import__("tokenmill.sft.template").sft.template.__file__).with_name("chatml.jinja"), template)
    data = tmp_path / "chat.jsonl"
    data.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n')
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(yaml.safe_dump({"track": "sft", "inputs": [str(data)], "out": str(tmp_path / "out"),
                                        "sft": {key: str(template) if value == "TEMPLATE" else value}}))
    return pipeline


@pytest.mark.parametrize("key", sorted(SFT_GOOD))
def test_validate_and_sft_accept_every_good_sft_value(key, tmp_path, capsys):
    pipeline = _sft_file(tmp_path, key, SFT_GOOD[key])
    problems, _ = check_pipeline(pipeline)
    assert [p for p in problems if "sft" in p] == []
    assert main(["sft", "--config", str(pipeline), "--dry-run"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("key", sorted(SFT_BAD))
def test_validate_and_sft_refuse_every_bad_sft_value_naming_the_key(key, tmp_path, capsys):
    pipeline = _sft_file(tmp_path, key, SFT_BAD[key])
    problems, _ = check_pipeline(pipeline)
    assert any(f"sft.{key}" in p for p in problems), problems
    capsys.readouterr()
    assert main(["sft", "--config", str(pipeline), "--dry-run"]) == 1
    assert f"sft.{key}" in capsys.readouterr().err


@pytest.mark.parametrize("argv, named", [(["--verify", "-1"], "--verify -1"), (["--max-length", "0"], "--max-length 0"),
                                         (["--date", "29/02/2024"], "--date 29/02/2024")])
def test_a_bad_sft_flag_is_a_usage_error_naming_it(argv, named, tmp_path, capsys):
    pipeline = _sft_file(tmp_path, "verify", 0)
    assert main(["sft", "--config", str(pipeline), "--dry-run", *argv]) == 2
    assert named in capsys.readouterr().err


def test_the_sft_flags_reach_the_run_and_its_fingerprint(tmp_path):
    """``--no-train-reasoning`` (a negated switch) and ``--on-unsafe reject`` over the file's ``sft:`` section: the
    run's recorded options are the class's fingerprinted fields, the flags' values in them."""
    import json

    pipeline = _sft_file(tmp_path, "train_on", "last")
    assert main(["sft", "--config", str(pipeline), "--no-train-reasoning", "--on-unsafe", "reject", "--verify", "0"]) == 0
    recorded = json.loads((tmp_path / "out" / "manifest.json").read_text())["config"]["sft"]
    assert recorded == SftOptions(train_on="last", train_reasoning=False, on_unsafe="reject", verify=0).fingerprinted()
    assert "chat_template" not in recorded and "seq_len" not in recorded  # recorded apart: the template's digest
