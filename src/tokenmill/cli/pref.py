"""``tokenmill pref``: its parser (options: :class:`~tokenmill.job.options.PrefJobOptions` and
:class:`~tokenmill.sft.options.PrefOptions`) and its run (:mod:`tokenmill.pref.run`)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from tokenmill.cli import jobs
from tokenmill.job.options import JobOptions, PrefJobOptions, add_flags, add_options, checked_flags, flag_values
from tokenmill.pref.run import print_pref_summary, run_pref
from tokenmill.selection import render_plan
from tokenmill.sft.options import PrefOptions


def add_parser(sub: Any) -> None:
    p = sub.add_parser("pref", help="preference pairs (DPO, reward) and KTO records into pair shards, tokenized as "
                                    "TRL does, the prompt stored once")
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="files, directories, globs or fsspec URLs")
    p.add_argument("--out", help="output directory (pair shards, manifest.json, rejects.jsonl, datacard.md), or "
                   "s3://bucket/prefix")
    p.add_argument("--config", help="YAML pipeline file (flags override it)")
    jobs.add_engine_options(p)
    add_options(p, "pref", PrefJobOptions, other="SFT or pretraining track")
    add_flags(p, PrefOptions)


def run(args: argparse.Namespace) -> int:
    """``tokenmill pref``: the pipeline file and the flags on top (:func:`tokenmill.cli.jobs.settings`)."""
    settings = jobs.settings(args)
    engine, out = jobs.executor(args, settings), settings["out"]
    pref = checked_flags(args, PrefOptions)  # its own options, flags only
    options = JobOptions.from_settings({**flag_values(args, PrefJobOptions), **settings, "workers": None})
    manifest = run_pref(settings["inputs"], out=out, tokenizer=settings.get("tokenizer", "default"),
                        shard_tokens=settings.get("shard_tokens", 1 << 28),
                        options=_with_workers(options, engine), executor=engine.get("executor"),
                        schemas=settings.get("schema"), **pref)
    if options.dry_run:
        print(render_plan(manifest))
        return 0
    print_pref_summary(manifest, settings["out"])
    return 0


def _with_workers(options: JobOptions, engine: dict) -> JobOptions:
    return dataclasses.replace(options, workers=engine.get("workers"))
