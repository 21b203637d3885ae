"""``tokenmill select``: draw the raw documents that look most like a reference set (DSIR importance
resampling, :mod:`tokenmill.curate.select.dsir`).

The command is ``tokenmill curate`` with one step, ``{name: dsir, target: [...], n: N}``: the one job driver
(same job flags, ``--dry-run``, ``--limit``, guard, resume after kill -9, manifest envelope, data card),
the curate outputs (``documents/`` holds the drawn documents, ``ledger/`` every document's
``dsir.log_weight`` and whether it was drawn: ``kept``, reason ``dsir_v1:not_drawn`` or
``dsir_v1:too_short``), and the funnel and ``report.html``. (``tokenmill sft select`` is the SFT track's
own selection, by score and prompt cluster.)
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill.curate.workflows.curate import run_curate
from tokenmill.engine.store import shown
from tokenmill.errors import UsageError
from tokenmill.job.options import JobOptions, add_options, integer, number, option, paths
from tokenmill.selection import render_plan
from tokenmill.steps.build import build_step


@dataclass(frozen=True, kw_only=True)
class SelectOptions(JobOptions):
    """``tokenmill select``: the job flags, the reference and the size of the draw (the ``dsir`` step's
    parameters, which it checks)."""
    target: tuple[str, ...] = option((), "the reference documents (files, directories)", paths, kind="list",
                                     metavar="REF")
    n: int | None = option(None, "documents to draw", integer, metavar="N", parse=int)
    fraction: float | None = option(None, "share of the pool (documents of at least --min-words words) to draw",
                                    number, metavar="F", parse=float)
    seed: int = option(0, "seed of the draw (default 0)", integer, metavar="S", parse=int)
    min_words: int = option(100, "documents with fewer words are never drawn (default 100, data-selection's)", integer,
                            metavar="N", parse=int)
    buckets: int = option(10_000, "hashed n-gram buckets (default 10000, data-selection's)", integer, metavar="N",
                          parse=int)

if TYPE_CHECKING:
    from tokenmill.engine.store import Url


def add_parser(sub: Any) -> None:
    p = sub.add_parser("select", help="draw the raw documents most like a reference set (DSIR importance resampling)")
    p.add_argument("--from", dest="inputs", nargs="+", default=[], metavar="RAW",
                   help="the raw documents to draw from (files, directories, globs)")
    p.add_argument("--out", help="output directory (documents/, ledger/, manifest.json, report.html), or "
                   "s3://bucket/prefix")
    p.add_argument("--engine", choices=["local", "ray"], help="where units run: a local process pool (default) or Ray")
    p.add_argument("--ray-address", help="join this Ray cluster (default with --engine ray: start a local one)")
    add_options(p, "select", SelectOptions, other="SFT track")


def step_spec(args: argparse.Namespace, options: SelectOptions) -> dict:
    if not options.target:
        raise UsageError("give the reference documents with --target REF...")
    if not args.inputs:
        raise UsageError("give the raw documents to draw from with --from RAW...")
    if not args.out:
        raise UsageError("missing --out DIR")
    if (options.n is None) == (options.fraction is None):
        raise UsageError("give --n N (documents to draw) or --fraction F (of the pool), one of the two")
    size = {"n": options.n} if options.n is not None else {"fraction": options.fraction}
    return {"name": "dsir", "target": list(options.target), **size, "seed": options.seed,
            "min_words": options.min_words, "buckets": options.buckets}


def _executor(args: argparse.Namespace, options: JobOptions) -> dict[str, Any]:
    if args.engine != "ray":
        if args.ray_address:
            raise UsageError("--ray-address needs --engine ray")
        return {"workers": options.workers}
    from tokenmill.engine.ray import RayExecutor

    return {"executor": RayExecutor(workers=options.workers, address=args.ray_address)}


def summary(manifest: dict, out: Path | Url) -> str:
    c = manifest["counts"]
    entry = next(s for s in manifest["steps"] if s["name"] == "dsir")
    short = c["filtered"].get(f"{entry['id']}:too_short", 0)
    return (f"select: drew {c['kept']:,} of {c['input']:,} documents ({short:,} under {entry['params']['min_words']} "
            f"words never drawn) -> {out / 'documents'}")


def run(args: argparse.Namespace) -> int:
    options = SelectOptions.from_flags(args)
    spec = step_spec(args, options)
    build_step(spec, where="select")  # a bad option or an empty reference stops here, before any work
    manifest = run_curate(args.inputs, out=args.out, steps=[spec], workflow="select", **options.run_kwargs(),
                          **_executor(args, options))
    if options.dry_run:

        print(render_plan(manifest))
        return 0
    out = shown(args.out)
    print(summary(manifest, out))
    print(manifest["identity"])
    print(f"documents: {out / 'documents'}\nledger: {out / 'ledger'}\nmanifest: {out / 'manifest.json'}")
    return 0
