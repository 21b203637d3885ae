"""``tokenmill sft select`` (``tokenmill sft-select``): its parser (options: :mod:`tokenmill.sft.select_options`) and
its run (:mod:`tokenmill.sft.select`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tokenmill.curate.quality.sft import SftQuality
from tokenmill.engine.store import shown
from tokenmill.errors import UsageError
from tokenmill.job.options import add_options
from tokenmill.selection import render_plan
from tokenmill.sft.select import Selection, select
from tokenmill.sft.select_options import SftSelectOptions
from tokenmill.sft.taskmix import parse_mix


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sft-select", help="(also `tokenmill sft select`) keep the best N SFT examples, at most K "
                                          "per cluster of near-identical prompts")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="SFT files, directories or globs")
    p.add_argument("--out", required=True, help="output directory (or s3://bucket/prefix): selected.jsonl, "
                   "selection.parquet, manifest.json")
    add_options(p, "sft-select", SftSelectOptions, other="pretraining track")


def run(args: argparse.Namespace) -> int:
    """``tokenmill sft select``."""
    options = SftSelectOptions.from_flags(args)
    how = Selection(n=options.n, per_cluster=options.per_cluster, score=options.score, model=options.model,
                    mix=_mix_flag(options.mix))
    m = select(args.inputs, out=args.out, how=how, quality_rules=SftQuality(check_language=options.check_language),
               options=options)
    if options.dry_run:
        print(render_plan(m))
        return 0
    r = m["report"]
    print(f"sft select: {m['counts']['kept']:,} kept of {m['counts']['input']:,} records "
          f"({r['scored']:,} scored in {r['clusters']:,} prompt clusters, largest {r['largest_cluster']}) -> {args.out}")
    print(m["identity"])
    if r.get("warning"):
        print(f"warning: {r['warning']}", file=sys.stderr)
    print(f"selected: {shown(args.out) / 'selected.jsonl'}\nmanifest: {shown(args.out) / 'manifest.json'}")
    return 0


def _mix_flag(value: str | None) -> dict[str, float] | None:
    """``--mix``'s value parsed; a bad one is a one-line usage error naming what to change."""
    if value is None:
        return None
    try:
        return parse_mix(value)
    except ValueError as exc:
        raise UsageError(f"--mix {value!r}: {exc}") from None
