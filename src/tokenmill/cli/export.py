"""``tokenmill export DIR --to FORMAT --out PATH``: token shards to Megatron ``.bin``/``.idx``, a ``datasets``
directory or a flat token file (:mod:`tokenmill.shards.export`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from tokenmill.job.options import Options, add_flags, add_job_flags, choice, option, positive_int
from tokenmill.shards.export import export


@dataclass(frozen=True, kw_only=True)
class ExportOptions(Options):
    """``tokenmill export`` (and the job flags it takes: ``--overwrite``, ``--dry-run``)."""

    to: str = option("", "target format", choice("megatron", "hf", "bin"), required=True)
    seq_len: int | None = option(None, "fixed-length samples (concatenate and chunk)", positive_int, metavar="N",
                                 parse=int)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("export", help="export shards to Megatron .bin/.idx, a datasets directory or a flat token file")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--out", required=True, help="output path (prefix for megatron), or s3://bucket/path (written "
                   "locally, then uploaded; credentials and endpoint from the environment, as s3fs reads them)")
    add_flags(p, ExportOptions)
    add_job_flags(p, "export", "overwrite", "dry_run")


def run(args: argparse.Namespace) -> int:
    options = ExportOptions.from_flags(args)
    written = export(args.directory, to=options.to, out=args.out, seq_len=options.seq_len,
                     overwrite=bool(args.overwrite), dry_run=bool(args.dry_run))
    if args.dry_run:
        print(f"dry run: `tokenmill export` would write {args.directory} as {options.to}: {written['n_sequences']:,} "
              f"sequences, {written['n_tokens']:,} tokens -> {', '.join(written['paths'])} (nothing written)")
        return 0
    print(f"exported {args.directory} as {options.to}: {written['n_sequences']:,} sequences, "
          f"{written['n_tokens']:,} tokens -> {', '.join(written['paths'])}")
    if written.get("dtype_note"):
        print(f"token dtype: {written['dtype_note']}")
    return 0
