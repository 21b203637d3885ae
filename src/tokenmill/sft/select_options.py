"""The options of ``tokenmill sft select``, declared once (flags, fingerprint); light, so that building the parser
imports neither numpy nor pyarrow."""

from __future__ import annotations

from dataclasses import dataclass

from tokenmill.job.options import JobOptions, boolean, choice, integer, option, text


@dataclass(frozen=True, kw_only=True)
class SftSelectOptions(JobOptions):
    """``tokenmill sft select``: the job flags, how many examples to keep and how they are scored."""

    n: int | None = option(None, "examples to keep", integer, metavar="N", parse=int, required=True)
    per_cluster: int = option(1, "most examples kept per prompt cluster (default 1)", integer, metavar="K", parse=int)
    score: str = option("length", "length (assistant words, log-scaled) or quality (classifier probability; needs "
                        "--model)", choice("length", "quality"))
    model: str | None = option(None, "quality model for --score quality", text, metavar="PATH")
    mix: str | None = option(None, "draw each task label's share of --n by score, e.g. academic=0.3,user=0.7 (labels: "
                             "academic for templated tasks, user for natural requests; shares sum to 1)", text,
                             metavar="LABEL=SHARE,...")
    check_language: bool = option(False, "also drop prompt/response language mismatches", boolean, kind="switch")
