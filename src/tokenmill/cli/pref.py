"""The ``tokenmill pref`` parser, apart from :mod:`tokenmill.pref.run`, so that building the CLI's parser imports
neither numpy nor pyarrow (as :mod:`tokenmill.cli.sft_select`)."""

from __future__ import annotations

from typing import Any

from tokenmill.job.options import PrefJobOptions, add_flags, add_options
from tokenmill.sft.options import PrefOptions


def add_parser(sub: Any) -> None:
    p = sub.add_parser("pref", help="preference pairs (DPO, reward) and KTO records into pair shards, tokenized as "
                                    "TRL does, the prompt stored once")
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="files, directories, globs or fsspec URLs")
    p.add_argument("--out", help="output directory (pair shards, manifest.json, rejects.jsonl, datacard.md), or "
                   "s3://bucket/prefix")
    p.add_argument("--config", help="YAML pipeline file (flags override it)")
    p.add_argument("--engine", choices=["local", "ray"], help="where units run: a local process pool (default) or a "
                   "Ray cluster (needs tokenmill[ray]); overrides engine.name of --config")
    p.add_argument("--ray-address", help="join this Ray cluster, e.g. auto or HEAD:6379")
    add_options(p, "pref", PrefJobOptions, other="SFT or pretraining track")
    add_flags(p, PrefOptions)
