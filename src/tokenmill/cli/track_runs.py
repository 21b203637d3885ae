"""The runs of ``tokenmill pretrain``, ``tokenmill sft`` and ``tokenmill curate`` (their parsers:
:mod:`tokenmill.cli.tracks`), imported once a token track's fork server is starting."""

from __future__ import annotations

import argparse

from tokenmill.cli import jobs
from tokenmill.curate.report.funnel import render_funnel
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.curate.workflows.presets import refuse_in_pretrain, step_specs
from tokenmill.engine.store import shown
from tokenmill.job.options import checked_flags
from tokenmill.pretrain import run_pretrain
from tokenmill.sft.corpus import build_sft_steps
from tokenmill.sft.options import SftOptions
from tokenmill.sft.report import render_report
from tokenmill.sft.run import run_sft
from tokenmill.steps.build import build_steps
from tokenmill.track import print_summary


def run(args: argparse.Namespace) -> int:
    return {"pretrain": pretrain, "sft": sft, "curate": curate}[args.command](args)


def pretrain(args: argparse.Namespace) -> int:
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


def sft(args: argparse.Namespace) -> int:
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


def curate(args: argparse.Namespace) -> int:
    cfg = jobs.settings(args)
    manifest = run_curate(
        cfg["inputs"], out=cfg["out"], steps=cfg.get("steps"), preset=cfg.get("preset"), **jobs.executor(args, cfg),
        quality_model=cfg.get("quality_model"), robots_snapshot=cfg.get("robots_snapshot"), schemas=cfg.get("schema"),
        score_removed=not args.score_survivors_only, **jobs.job_options(args, cfg).run_kwargs(),
    )
    if args.dry_run:
        return jobs.print_plan(manifest)
    out = shown(cfg["out"])
    c = manifest["counts"]
    print(f"curate: {c['kept']:,} kept of {c['input']:,} records in {len(manifest['documents'])} file(s) -> {out / 'documents'}")
    print(render_funnel(manifest["funnel"]))
    print(manifest["identity"])
    changed = {k: v for k, v in c["extra"].items() if not k.startswith("skipped:")}
    if changed:
        print("rewritten: " + ", ".join(f"{k} {v:,}" for k, v in sorted(changed.items())))
    if manifest.get("rejects_file"):
        print(f"rejects: {out / manifest['rejects_file']}")
    print(f"ledger: {out / 'ledger'}\nreport: {out / 'report.html'}\nmanifest: {out / 'manifest.json'}")
    return 0
