"""The ``tokenmill sft-select`` (``tokenmill sft select``) parser and options, apart from :mod:`tokenmill.sft.select`,
so that building the CLI's parser imports neither numpy nor pyarrow (every command pays for what it builds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenmill.job.options import JobOptions, add_options, boolean, choice, integer, option, text


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


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sft-select", help="(also `tokenmill sft select`) keep the best N SFT examples, at most K "
                                          "per cluster of near-identical prompts")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="SFT files, directories or globs")
    p.add_argument("--out", required=True, help="output directory: selected.jsonl, selection.parquet, manifest.json")
    add_options(p, "sft-select", SftSelectOptions, other="pretraining track")
