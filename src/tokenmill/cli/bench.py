"""``tokenmill bench formats``: disk size, write time, scan speed, memory and random access per storage format."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from tokenmill.bench.formats import bench_formats
from tokenmill.job.options import Options, add_flags, number, option, text


@dataclass(frozen=True, kw_only=True)
class BenchFormatsOptions(Options):
    """``tokenmill bench formats``."""

    mb: float = option(50.0, "corpus size in MB (default 50)", number, metavar="MB", parse=float)
    workdir: str | None = option(None, "where to write the formats (default: a temporary directory)", text,
                                 metavar="DIR")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="measured benchmarks")
    bsub = p.add_subparsers(dest="bench", required=True, metavar="WHAT")
    b = bsub.add_parser("formats", help="disk size, write time, scan speed, RSS and random access per storage format")
    b.add_argument("inputs", nargs="*", metavar="INPUT", help="documents to use (default: a generated corpus)")
    add_flags(b, BenchFormatsOptions)


def run(args: argparse.Namespace) -> int:
    options = BenchFormatsOptions.from_flags(args)
    print(bench_formats(args.inputs, mb=options.mb, workdir=options.workdir))
    return 0
