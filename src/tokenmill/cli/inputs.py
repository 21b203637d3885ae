"""``tokenmill inspect`` (each input's format and kind, as the router sees it) and ``tokenmill validate`` (a
pipeline file, its inputs and its schema mappings checked, nothing run)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, fields
from typing import Any

from tokenmill.check import check_pipeline
from tokenmill.job.options import JobOptions, PrintOptions, add_flags, option, positive_int
from tokenmill.route import inspect, render_table


@dataclass(frozen=True, kw_only=True)
class InspectOptions(PrintOptions):
    """``tokenmill inspect`` (and ``--text-mode``, the job flag: how plain text is read, as a run reads it)."""

    sample: int = option(200, "records sampled per input (default 200)", positive_int, metavar="N", parse=int)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("inspect", help="detect each input's format and kind (pretrain / sft / preference / unknown)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    add_flags(p, InspectOptions)
    add_flags(p, JobOptions, skip=tuple(f.name for f in fields(JobOptions) if f.name != "text_mode"))

    p = sub.add_parser("validate", help="check a pipeline file, its inputs and its schema mappings; exit 1 on problems")
    p.add_argument("pipeline", metavar="PIPELINE", help="the YAML pipeline file")


def run(args: argparse.Namespace) -> int:
    return run_inspect(args) if args.command == "inspect" else run_validate(args)


def run_inspect(args: argparse.Namespace) -> int:
    options = InspectOptions.from_flags(args)
    routes = inspect(args.paths, sample=options.sample, text_mode=JobOptions.from_flags(args).text_mode)
    if options.json:
        print(json.dumps([r.to_dict() for r in routes], indent=2, default=str))
    else:
        print(render_table(routes))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    problems, notes = check_pipeline(args.pipeline)
    for note in notes:
        print(f"  {note}")
    if problems:
        print(f"{args.pipeline}: {len(problems)} problem(s)")
        print("\n".join(f"  - {p}" for p in problems))
        return 1
    print(f"{args.pipeline}: OK")
    return 0
