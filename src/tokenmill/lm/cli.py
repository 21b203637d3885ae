"""The ``tokenmill lm`` parser and options, apart from :mod:`tokenmill.lm.train`, so that building the CLI's parser
imports neither numpy nor pyarrow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenmill.job.options import JobOptions, add_options, integer, ints, option, paths
from tokenmill.job.options import text as a_string  # the field `text` below hides the name in the class body


@dataclass(frozen=True, kw_only=True)
class LmTrainOptions(JobOptions):
    """``tokenmill lm train``: the job flags, the reference text and the model's order and pruning."""

    text: tuple[str, ...] = option((), "reference documents (files, directories or globs, read as `tokenmill pretrain` "
                                   "reads them)", paths, kind="list", metavar="REF", required=True)
    order: int = option(5, "n-gram order (default 5)", integer, metavar="N", parse=int)
    language: str | None = option(None, "the reference's language code (recorded; the perplexity step checks it)",
                                  a_string, metavar="CODE")
    prune: tuple[int, ...] | None = option(None, "per order, drop n-grams with an adjusted count at most N (the last "
                                           "value holds for higher orders; default 0 0 1: singleton 3-grams and "
                                           "above)", ints, kind="list", metavar="N", parse=int)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lm", help="n-gram language models of reference text (for the perplexity step)")
    lsub = p.add_subparsers(dest="lm", required=True, metavar="WHAT")
    t = lsub.add_parser("train", help="train an interpolated modified Kneser-Ney n-gram model (ARPA for KenLM, and "
                                      "tokenmill's binary form)")
    t.add_argument("--out", required=True, help="output directory: model.arpa, model.tmlm, manifest.json")
    add_options(t, "lm train", LmTrainOptions, other="SFT track")
