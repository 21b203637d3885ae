"""The ``tokenmill lm`` parser and options, apart from :mod:`tokenmill.lm.train`, so that building the CLI's parser
imports neither numpy nor pyarrow."""

from __future__ import annotations

from typing import Any

from tokenmill.job.options import add_options
from tokenmill.lm.options import LmTrainOptions


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lm", help="n-gram language models of reference text (for the perplexity step)")
    lsub = p.add_subparsers(dest="lm", required=True, metavar="WHAT")
    t = lsub.add_parser("train", help="train an interpolated modified Kneser-Ney n-gram model (ARPA for KenLM, and "
                                      "tokenmill's binary form)")
    t.add_argument("--out", required=True, help="output directory (or s3://bucket/prefix): model.arpa, model.tmlm, "
                   "manifest.json")
    add_options(t, "lm train", LmTrainOptions, other="SFT track")
