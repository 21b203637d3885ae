"""Options are declared once, in each command's options class: its flags, the pipeline file's keys and what
``validate`` accepts are derived from it, so the command line, the file and ``validate`` cannot disagree."""

from __future__ import annotations

from dataclasses import fields

import pytest

from tokenmill.check import check_pipeline
from tokenmill.cli import build_parser, main
from tokenmill.config import TOP
from tokenmill.job.options import COMMAND_OPTIONS, STRUCTURE, file_keys, file_rules

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
