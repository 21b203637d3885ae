"""``tokenmill demo``: both tracks end to end on a generated mixed input, with the embedded tokenizer."""

from __future__ import annotations

import argparse
from typing import Any

from tokenmill.demo import run_demo
from tokenmill.job.options import add_job_flags


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="both tracks end to end on a generated mixed input with the embedded tokenizer")
    p.add_argument("--out", default="tokenmill-demo", help="output directory (default ./tokenmill-demo), or s3://bucket/prefix")
    add_job_flags(p, "demo", "dry_run")


def run(args: argparse.Namespace) -> int:
    run_demo(args.out, dry_run=bool(args.dry_run))
    return 0
