"""The ``tokenmill sft-select`` (``tokenmill sft select``) parser, apart from :mod:`tokenmill.sft.select`, so
that building the CLI's parser imports neither numpy nor pyarrow (every command pays for what it builds)."""

from __future__ import annotations

from typing import Any

from tokenmill.job.options import JobOptions, add_flags


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sft-select", help="(also `tokenmill sft select`) keep the best N SFT examples, at most K "
                                          "per cluster of near-identical prompts")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="SFT files, directories or globs")
    p.add_argument("--out", required=True, help="output directory (or s3://bucket/prefix): selected.jsonl, "
                   "selection.parquet, manifest.json")
    p.add_argument("--n", type=int, required=True, help="examples to keep")
    p.add_argument("--per-cluster", type=int, default=1, help="most examples kept per prompt cluster (default 1)")
    p.add_argument("--score", default="length", choices=["length", "quality"],
                   help="length (assistant words, log-scaled) or quality (classifier probability; needs --model)")
    p.add_argument("--model", help="quality model for --score quality")
    p.add_argument("--mix", metavar="LABEL=SHARE,...",
                   help="draw each task label's share of --n by score, e.g. academic=0.3,user=0.7 (labels: academic "
                        "for templated tasks, user for natural requests; shares sum to 1)")
    p.add_argument("--check-language", action="store_true", help="also drop prompt/response language mismatches")
    add_flags(p, JobOptions, skip=("text_mode",), other="pretraining track")
