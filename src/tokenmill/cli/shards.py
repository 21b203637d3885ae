"""``tokenmill audit DIR`` (the shards verified, decoded examples with their trained spans marked) and
``tokenmill stats DIR`` (tokens, documents, supervised share, packing numbers)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from tokenmill.job.options import PrintOptions, add_flags, non_negative, option, paths, positive_int, text
from tokenmill.loader.stats import render_stats, shard_stats
from tokenmill.shards.audit import audit, render_audit
from tokenmill.shards.pick import Pick


@dataclass(frozen=True, kw_only=True)
class AuditOptions(PrintOptions):
    """``tokenmill audit``: how many examples, decoded with which tokenizer, picked how."""

    n: int = option(3, "examples to show (default 3)", non_negative, metavar="N", parse=int)
    tokenizer: str | None = option(None, "tokenizer to decode with (default: the one named in the shards)", text,
                                   metavar="SPEC")
    source: tuple[str, ...] = option((), "show documents of this source only: its path, file name or a glob "
                                     "('*gsm8k*'); repeatable", paths, kind="repeat", metavar="NAME")
    ids: tuple[str, ...] = option((), "show the document with this id; repeatable", paths, kind="repeat", cli="--id",
                                  metavar="ID")
    shape: str | None = option(None, "show documents of this shape: untrained (no trained token), unstopped (a "
                               "trained span not ending in a stop token), multi-turn (two trained spans or more), "
                               "longest, shortest", text, metavar="SHAPE")


@dataclass(frozen=True, kw_only=True)
class StatsOptions(PrintOptions):
    """``tokenmill stats``."""

    seq_len: int | None = option(None, "sequence length for the packing numbers", positive_int, metavar="N", parse=int)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("audit", help="verify a shard directory and show decoded examples with trained spans marked")
    p.add_argument("directory", metavar="DIR")
    add_flags(p, AuditOptions)

    p = sub.add_parser("stats", help="tokens, documents, supervised share and packing numbers of a shard directory")
    p.add_argument("directory", metavar="DIR")
    add_flags(p, StatsOptions)


def run(args: argparse.Namespace) -> int:
    return run_audit(args) if args.command == "audit" else run_stats(args)


def run_audit(args: argparse.Namespace) -> int:
    options = AuditOptions.from_flags(args)
    pick = Pick(options.source, options.ids, options.shape)
    result = audit(args.directory, n=options.n, tokenizer=options.tokenizer, pick=pick)
    print(json.dumps(result, indent=2) if options.json else render_audit(result, color=sys.stdout.isatty()))
    return 0 if not result["problems"] else 1


def run_stats(args: argparse.Namespace) -> int:
    options = StatsOptions.from_flags(args)
    result = shard_stats(args.directory, seq_len=options.seq_len)
    print(json.dumps(result, indent=2) if options.json else render_stats(result))
    return 0
