"""Options as data: the job options are declared once (``JobOptions``), and the command-line flags, the
pipeline file's keys and the API's defaults are derived from that declaration, so they cannot disagree."""

from __future__ import annotations

import argparse
import inspect
from dataclasses import fields

import pytest

from tokenmill.cli import build_parser, main
from tokenmill.config import TOP, check
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.job.options import JobOptions
from tokenmill.pretrain import run_pretrain
from tokenmill.sft.run import run_sft

COMMANDS = {"pretrain": (), "sft": ("text_mode",), "curate": ()}


def _sub(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_job_option_is_a_flag_of_every_job_command_with_its_declared_help(command):
    flags = {a.dest: a for a in _sub(command)._actions}
    for f in fields(JobOptions):
        if f.name in COMMANDS[command]:
            assert f.name not in flags
            continue
        assert f.name in flags, f"--{f.name.replace('_', '-')} missing from `tokenmill {command}`"
        declared = f.metadata["flag"].help.split("{")[0]
        assert flags[f.name].help.startswith(declared)


def test_the_pipeline_file_takes_exactly_the_job_options_declared_for_it():
    for f in fields(JobOptions):
        assert (f.name in TOP) == f.metadata["flag"].in_file, f.name
    cfg, problems = check({"unit_bytes": "8MiB", "exclude": "*.gz", "limit": 3, "text_mode": "line"})
    assert problems == [] and cfg == {"unit_bytes": 8 << 20, "exclude": ["*.gz"], "limit": 3, "text_mode": "line"}
    _, problems = check({"dry_run": True})
    assert problems and "unknown key" in problems[0]  # a flag-only option


@pytest.mark.parametrize("run", [run_pretrain, run_sft, run_curate])
def test_the_api_defaults_are_the_declared_defaults(run):
    params = inspect.signature(run).parameters
    for f in fields(JobOptions):
        if f.name in ("no_progress", "workers") or f.name not in params:
            continue
        default = params[f.name].default
        assert (tuple(default) if isinstance(default, (list, tuple)) else default) == f.default, (run.__name__, f.name)


def test_a_bad_value_is_refused_the_same_way_from_the_file_and_the_command_line(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "one document"}\n')
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("unit_bytes: lots\n")
    assert main(["curate", str(data), "--out", str(tmp_path / "a"), "--config", str(pipeline)]) == 1
    from_file = capsys.readouterr().err
    assert main(["curate", str(data), "--out", str(tmp_path / "b"), "--unit-bytes", "lots"]) == 2
    from_flag = capsys.readouterr().err
    for err in (from_file, from_flag):
        assert "unit_bytes: expected a size like 64MiB or 1000000, got 'lots'" in err, err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_flags_override_the_file_and_the_file_overrides_the_defaults(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"text": "document {i} with a few words"}}\n' for i in range(10)))
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("limit: 4\nsteps: [{name: length, min_chars: 1}]\n")
    assert main(["curate", str(data), "--out", str(tmp_path / "a"), "--config", str(pipeline), "--no-progress"]) == 0
    assert "4 kept of 4 records" in capsys.readouterr().out
    assert main(["curate", str(data), "--out", str(tmp_path / "b"), "--config", str(pipeline), "--limit", "2",
                 "--no-progress"]) == 0
    assert "2 kept of 2 records" in capsys.readouterr().out
