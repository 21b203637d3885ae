"""The ``tokenmill lm`` parser, apart from :mod:`tokenmill.lm.train`, so that building the CLI's parser imports
neither numpy nor pyarrow."""

from __future__ import annotations

from typing import Any

from tokenmill.job.options import JobOptions, add_flags


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lm", help="n-gram language models of reference text (for the perplexity step)")
    lsub = p.add_subparsers(dest="lm", required=True, metavar="WHAT")
    t = lsub.add_parser("train", help="train an interpolated modified Kneser-Ney n-gram model (ARPA for KenLM, and "
                                      "tokenmill's binary form)")
    t.add_argument("--text", nargs="+", required=True, metavar="REF",
                   help="reference documents (files, directories or globs, read as `tokenmill pretrain` reads them)")
    t.add_argument("--out", required=True, help="output directory (or s3://bucket/prefix): model.arpa, model.tmlm, "
                   "manifest.json")
    t.add_argument("--order", type=int, default=5, help="n-gram order (default 5)")
    t.add_argument("--language", help="the reference's language code (recorded; the perplexity step checks it)")
    t.add_argument("--prune", type=int, nargs="+", metavar="N",
                   help="per order, drop n-grams with an adjusted count at most N (the last value holds for higher "
                        "orders; default 0 0 1: singleton 3-grams and above)")
    add_flags(t, JobOptions, other="SFT track")

