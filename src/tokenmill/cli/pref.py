"""The ``tokenmill pref`` parser, apart from :mod:`tokenmill.pref.run`, so that building the CLI's parser imports
neither numpy nor pyarrow (as :mod:`tokenmill.cli.sft_select`)."""

from __future__ import annotations

from typing import Any

from tokenmill.job.options import PrefJobOptions, add_flags

NOT_TAKEN = ("text_mode",)  # preference records, never plain-text lines


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
    add_flags(p, PrefJobOptions, skip=NOT_TAKEN, other="SFT or pretraining track")
    p.add_argument("--chat-template",
                   help="template file, tokenizer_config.json or directory (default: the tokenizer's own, else ChatML)")
    p.add_argument("--max-length", type=int, help="prompt + longest completion, in tokens: the completions keep their "
                   "starts; a pair whose prompt fills it is rejected (completion_truncated_away)")
    p.add_argument("--max-prompt-length", type=int, help="the prompt keeps its last N tokens")
    p.add_argument("--min-margin", type=float, help="rated pairs only: keep those whose chosen rating exceeds the "
                   "rejected one by at least this (unrated pairs are left out)")
    p.add_argument("--reasoning-policy", choices=["inline", "drop", "reject"],
                   help="reasoning the template does not render")
    p.add_argument("--no-train-reasoning", action="store_true", default=None, help="do not train reasoning blocks")
    p.add_argument("--allow-untrained-stop", action="store_true", default=None,
                   help="go on when the template's end-of-turn string is not a special token")
    p.add_argument("--date", help="the day (ISO 8601) chat templates that stamp the current time are rendered at")
