"""A command without a pipeline file reads its job flags through each option's own check, once
(``JobOptions.from_flags``): ``--unit-bytes 64MiB`` is bytes for every command, a bad value a usage error
naming the flag (``sft select`` passed the string on and failed with a TypeError)."""

from __future__ import annotations

import argparse
import json

import pytest

from tokenmill.cli import EXIT_USAGE, main
from tokenmill.errors import UsageError
from tokenmill.job.options import JobOptions


def _chats(path, n=6):
    rows = [{"messages": [{"role": "user", "content": f"Tell me about topic number {k}, please, in detail."},
                          {"role": "assistant", "content": f"Topic {k} is interesting because of many things."}]}
            for k in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_from_flags_checks_each_value_by_its_declaration():
    given = argparse.Namespace(unit_bytes="64MiB", limit=3, exclude=["*.gz"], workers=None)
    options = JobOptions.from_flags(given)
    assert (options.unit_bytes, options.limit, options.exclude) == (64 << 20, 3, ("*.gz",))
    with pytest.raises(UsageError, match=r"--unit-bytes 12XB: expected a size"):
        JobOptions.from_flags(argparse.Namespace(unit_bytes="12XB"))


def test_sft_select_takes_a_unit_size_with_its_unit(tmp_path, capsys):
    chats = _chats(tmp_path / "c.jsonl")
    assert main(["sft", "select", str(chats), "--out", str(tmp_path / "sel"), "--n", "2", "--unit-bytes", "64MiB"]) == 0
    manifest = json.loads((tmp_path / "sel" / "manifest.json").read_text())
    assert manifest["config"]["unit_bytes"] == 64 << 20
    capsys.readouterr()
    assert main(["sft", "select", str(chats), "--out", str(tmp_path / "bad"), "--n", "2", "--unit-bytes", "12XB"]) == EXIT_USAGE
    assert "--unit-bytes 12XB: expected a size" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
