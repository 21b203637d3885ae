"""The run of ``tokenmill pretrain`` (its parser: :mod:`tokenmill.cli.tracks`), imported once its fork server
is starting."""

from __future__ import annotations

import argparse

from tokenmill.cli import jobs
from tokenmill.curate.report.funnel import render_funnel
from tokenmill.curate.workflows.presets import refuse_in_pretrain, step_specs
from tokenmill.pretrain import run_pretrain
from tokenmill.steps.build import build_steps
from tokenmill.track import print_summary


def run(args: argparse.Namespace) -> int:
    cfg = jobs.settings(args)
    refuse_in_pretrain(cfg.get("preset"))
    specs = step_specs(cfg.get("preset"), cfg.get("steps"), quality_model=cfg.get("quality_model"),
                       robots_snapshot=cfg.get("robots_snapshot"))
    steps = build_steps(specs, source=args.config or "config")
    manifest = run_pretrain(
        cfg["inputs"], out=jobs.out(args, cfg), tokenizer=cfg.get("tokenizer", "default"), **jobs.executor(args, cfg),
        shard_tokens=cfg.get("shard_tokens", 1 << 28), steps=steps, schemas=cfg.get("schema"),
        config={"steps": specs, "preset": cfg.get("preset"), "shard_tokens": cfg.get("shard_tokens", 1 << 28)},
        eos=cfg.get("eos"), **jobs.job_options(args, cfg).run_kwargs(), **jobs.split(cfg),
    )
    if args.dry_run:
        return jobs.print_plan(manifest)
    print_summary(manifest, cfg["out"])
    if manifest.get("funnel"):
        print(render_funnel(manifest["funnel"]))
    return 0
