"""The run of ``tokenmill curate`` (its parser: :mod:`tokenmill.cli.tracks`)."""

from __future__ import annotations

import argparse

from tokenmill.cli import jobs
from tokenmill.curate.report.funnel import render_funnel
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.engine.store import shown


def run(args: argparse.Namespace) -> int:
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
