"""The ``tokenmill sft-select`` (``tokenmill sft select``) parser and options, apart from :mod:`tokenmill.sft.select`,
so that building the CLI's parser imports neither numpy nor pyarrow (every command pays for what it builds)."""

from __future__ import annotations

from typing import Any

from tokenmill.job.options import add_options
from tokenmill.sft.select_options import SftSelectOptions


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sft-select", help="(also `tokenmill sft select`) keep the best N SFT examples, at most K "
                                          "per cluster of near-identical prompts")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="SFT files, directories or globs")
    p.add_argument("--out", required=True, help="output directory (or s3://bucket/prefix): selected.jsonl, "
                   "selection.parquet, manifest.json")
    add_options(p, "sft-select", SftSelectOptions, other="pretraining track")
