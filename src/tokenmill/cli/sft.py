"""The run of ``tokenmill sft`` (its parser: :mod:`tokenmill.cli.tracks`), imported once its fork server is starting."""

from __future__ import annotations

import argparse

from tokenmill.cli import jobs
from tokenmill.job.options import checked_flags
from tokenmill.sft.corpus import build_sft_steps
from tokenmill.sft.options import SftOptions
from tokenmill.sft.report import render_report
from tokenmill.sft.run import run_sft
from tokenmill.track import print_summary


def run(args: argparse.Namespace) -> int:
    cfg = jobs.settings(args)
    steps = build_sft_steps(cfg.get("steps"), source=args.config or "config")
    sft = {**(cfg.get("sft") or {}), **checked_flags(args, SftOptions)}  # the sft: section, flags on top
    manifest = run_sft(
        cfg["inputs"], out=jobs.out(args, cfg), tokenizer=cfg.get("tokenizer", "default"), **jobs.executor(args, cfg),
        shard_tokens=cfg.get("shard_tokens", 1 << 28), schemas=cfg.get("schema"), steps=steps,
        **{k: v for k, v in jobs.job_options(args, cfg).run_kwargs().items() if k != "text_mode"}, **jobs.split(cfg),
        **sft,
    )
    if args.dry_run:
        return jobs.print_plan(manifest)
    print_summary(manifest, cfg["out"])
    print(render_report(manifest.get("report", {})))
    return 0
