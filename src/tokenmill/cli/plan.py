"""``tokenmill plan RECIPE.yaml --out DIR`` and ``tokenmill plan RECIPE.yaml --check LOG_DIR``.

Needs no torch: the plan reads shard headers and ``.idx`` offsets only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmill import __version__
from tokenmill.base.accounting import Stats
from tokenmill.base.files import atomic_write
from tokenmill.engine.store import shown
from tokenmill.errors import UsageError
from tokenmill.job.driver import check_own_folder, hold_own_folder
from tokenmill.job.options import PrintOptions, add_flags, add_job_flags, option, text
from tokenmill.loader.plan import build_plan
from tokenmill.loader.plan_html import render_plan_html
from tokenmill.loader.recipe import load_recipe
from tokenmill.loader.runlog import check_run
from tokenmill.report.manifest import peak_rss_mb


@dataclass(frozen=True, kw_only=True)
class PlanOptions(PrintOptions):
    """``tokenmill plan`` (and ``--dry-run``, the job flag)."""

    check: str | None = option(None, "compare a run's consumed-token log with the plan", text, metavar="LOG_DIR")
    tokenizer: str | None = option(None, "the model's tokenizer: every source must have been written with it", text,
                                   metavar="SPEC")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="plan a training recipe: tokens per source and phase, epochs, warnings")
    p.add_argument("recipe", metavar="RECIPE", help="a recipe file (YAML; docs/recipes.md)")
    p.add_argument("--out", help="directory (or s3://bucket/prefix) for plan.json, plan.html and manifest.json (the "
                   "envelope every command writes, naming the recipe and its sha256; a plan is not data, so no data card)")
    add_flags(p, PlanOptions)
    add_job_flags(p, "plan", "dry_run")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    if args.out is None and args.check is None:
        raise UsageError("give --out DIR (write plan.json and plan.html) or --check LOG_DIR")
    if args.out is not None:
        check_own_folder(args.out, workflow="plan")  # refused before the plan is built, writing nothing
    plan = build_plan(load_recipe(args.recipe), tokenizer=args.tokenizer)
    if args.out is not None and not args.dry_run:
        write_plan(plan, args.out, recipe=args.recipe, started=started)
    if args.check is not None:
        return _check(plan, args)
    print(json.dumps(plan, indent=2) if args.json else render_plan(plan))
    if args.out is not None:
        done = "dry run: would write" if args.dry_run else "wrote"
        print(f"{done} {shown(args.out) / 'plan.json'} and {shown(args.out) / 'plan.html'}"
              + (" (nothing written)" if args.dry_run else ""))
    return 0


def _check(plan: dict, args: argparse.Namespace) -> int:
    result = check_run(plan, args.check)
    print(json.dumps(result, indent=2) if args.json else render_check(result))
    return 1 if result["problems"] else 0


def write_plan(plan: dict, out: Any, *, recipe: str | Path | None = None, started: float | None = None) -> None:
    """Write ``plan.json``, ``plan.html`` and, last, ``manifest.json`` (:func:`plan_manifest`) into ``out`` (a
    directory, or an ``s3://`` prefix: written in its work directory, then published), guarded like every
    ``--out``: a folder tokenmill did not write, or another command's output, is refused; an earlier plan there
    is replaced (exactly the files it recorded as written: a user's files stay, ``engine/outdir.py``)."""
    with hold_own_folder(out, workflow="plan") as local:
        atomic_write(local / "plan.json", (json.dumps(plan, indent=2) + "\n").encode("utf-8"))
        atomic_write(local / "plan.html", render_plan_html(plan).encode("utf-8"))
        manifest = plan_manifest(plan, recipe=recipe, started=time.monotonic() if started is None else started)
        atomic_write(local / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))


def plan_manifest(plan: dict, *, recipe: str | Path | None, started: float) -> dict:
    """The envelope every command writes, for a plan: its inputs are the recipe (with the sha256 of its bytes) and
    the sources' shard folders; it reads shard headers, no record, so its counts are the tokens it draws."""
    path = Path(recipe or plan["recipe"] or "")
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    sources = [{"path": s["path"], "format": "tokenmill shards", "source": name, "documents": s["documents"],
                "tokens": s["tokens_available"], "track": s["track"]} for name, s in plan["sources"].items()]
    stats = Stats(tokens=plan["tokens_drawn"])
    return {
        "tokenmill": __version__, "track": "plan",
        "inputs": [{"path": str(path), "format": "recipe", "sha256": digest}, *sources],
        "config": {"recipe": str(path), "recipe_sha256": digest, "fingerprint": plan["fingerprint"],
                   "seq_len": plan["seq_len"], "global_batch": plan["global_batch"], "total_steps": plan["total_steps"]},
        "counts": stats.to_dict(),
        "identity": f"a plan reads no record: {plan['total_samples']:,} samples, {plan['tokens_drawn']:,} tokens drawn "
                    f"from {len(sources)} source(s)",
        "run": {"seconds": round(time.monotonic() - started, 3), "peak_rss": peak_rss_mb([]), "units": len(sources),
                "engine": "this process"},
        "rejects_file": None, "skipped_inputs": [], "warnings": plan["warnings"],
    }


def render_plan(plan: dict) -> str:
    lines = [f"plan of {plan['recipe']}: {plan['total_steps']:,} steps x global batch {plan['global_batch']}, "
             f"{plan['tokens_drawn']:,} tokens drawn"]
    for p in plan["phases"]:
        mix = ", ".join(f"{s} {n:,} ({100 * p['share'][s]:.1f}%)" for s, n in p["tokens"].items())
        lines.append(f"  phase {p['name']}: steps {p['start_step']:,}-{p['end_step']:,} ({100 * p['run_share']:.0f}% of "
                     f"the tokens), seq_len {p['seq_len']:,}: {mix}")
    for name, s in plan["sources"].items():
        lines.append(f"  source {name}: {s['tokens_drawn']:,} of {s['tokens_available']:,} tokens, "
                     f"{s['epochs']:.2f} epochs{_repeats(s)} ({s['track'] or 'unused'})")
    lines += [f"warning: {w}" for w in plan["warnings"]]
    return "\n".join(lines)


def _repeats(source: dict) -> str:
    """How unevenly the epochs fall: tokens read more than once, tokens never read (when the source is drawn)."""
    if not source.get("tokens_drawn"):
        return ""
    shared = source.get("same_folder_as")
    return (f", {100 * source.get('repeated_share', 0):.0f}% of its tokens read more than once, "
            f"{100 * source.get('unread_share', 0):.0f}% never" + (f", its folder also read as {', '.join(shared)}"
                                                                   if shared else ""))


def render_check(result: dict) -> str:
    lines = [f"run log: {result['served_samples']:,} of {result['planned_samples']:,} planned samples served"
             + (f", {result['replayed_samples']:,} replayed after a resume (counted once)" if result["replayed_samples"] else "")]
    for p in result["phases"]:
        for s in sorted(set(p["planned"]) | set(p["consumed"])):
            lines.append(f"  {p['name']:<12} {s:<12} planned {p['planned'].get(s, 0):>14,}  consumed "
                         f"{p['consumed'].get(s, 0):>14,}")
    for phase, by_source in result["validation"].items():
        for source, points in by_source.items():
            lines.append(f"  validation {phase}/{source}: last loss {points[-1][1]:.4f} at step {points[-1][0]}")
    lines += [f"problem: {p}" for p in result["problems"]] or ["OK: the run consumed what the plan says"]
    return "\n".join(lines)
