"""``tokenmill lm train``: its parser (options: :mod:`tokenmill.lm.options`) and its run (:mod:`tokenmill.lm.train`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tokenmill.engine.store import shown
from tokenmill.job.options import add_options
from tokenmill.lm.options import LmTrainOptions
from tokenmill.lm.train import LmSettings, train
from tokenmill.selection import render_plan


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lm", help="n-gram language models of reference text (for the perplexity step)")
    lsub = p.add_subparsers(dest="lm", required=True, metavar="WHAT")
    t = lsub.add_parser("train", help="train an interpolated modified Kneser-Ney n-gram model (ARPA for KenLM, and "
                                      "tokenmill's binary form)")
    t.add_argument("--out", required=True, help="output directory (or s3://bucket/prefix): model.arpa, model.tmlm, "
                   "manifest.json")
    add_options(t, "lm train", LmTrainOptions, other="SFT track")


def run(args: argparse.Namespace) -> int:
    """``tokenmill lm train``."""
    options = LmTrainOptions.from_flags(args)
    settings = LmSettings(order=options.order, language=options.language, prune=options.prune or LmSettings.prune)
    m = train(list(options.text), out=args.out, settings=settings, options=options)
    if options.dry_run:
        print(render_plan(m))
        return 0
    model = m["model"]
    grams = ", ".join(f"{n:,} {k}-grams" for k, n in enumerate(model["ngrams"], start=1))
    print(f"lm train: {m['counts']['kept']:,} documents, {m['counts']['tokens']:,} words -> {grams} "
          f"({model['bytes']['model.tmlm'] / 1e6:.1f} MB binary) -> {args.out}")
    print(m["identity"])
    for warning in m.get("warnings") or []:
        print(f"warning: {warning}", file=sys.stderr)
    out = shown(args.out)
    print(f"model: {out / 'model.arpa'} (KenLM), {out / 'model.tmlm'}\nmanifest: {out / 'manifest.json'}")
    return 0
