"""The options of ``tokenmill lm train``, declared once (flags, fingerprint); light, so that building the parser imports
neither numpy nor pyarrow."""

from __future__ import annotations

from dataclasses import dataclass

from tokenmill.job.options import JobOptions, integer, ints, option, paths
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
