"""``tokenmill pretrain``, ``tokenmill sft`` and ``tokenmill curate``: their parsers (from their options
classes) and their runs.

The parsers are built, and a token track's fork server started (``job/early.py``), before the track itself is
imported (a small run's start-up is mostly imports; the pool's workers fork from the server, not from this
process): so this module holds the parsers and imports only options, and the runs are
:mod:`tokenmill.cli.pretrain`, :mod:`tokenmill.cli.sft` and :mod:`tokenmill.cli.curate` (``RUN_MODULE``), each
imported (with its track alone) once the server is starting.
"""

from __future__ import annotations

from typing import Any

from tokenmill.cli.jobs import add_job_options, add_run_options
from tokenmill.job.options import CurateOptions, PretrainOptions, SftJobOptions, add_flags, not_taken_help
from tokenmill.sft.options import SftOptions


def add_parser(sub: Any) -> None:
    p = sub.add_parser("pretrain", help="tokenize a document corpus into token shards (every token trained)")
    add_run_options(p, PretrainOptions)

    p = sub.add_parser("sft", help="render conversations with the chat template into token shards with loss masks")
    add_run_options(p, SftJobOptions, skip=("text_mode",))
    add_flags(p, SftOptions)  # the sft: section of --config
    p.epilog = not_taken_help("sft")

    p = sub.add_parser("curate", help="filter and clean documents: curated documents, decision ledger, funnel, report")
    add_job_options(p, CurateOptions, other="SFT track",
                    out_help="output directory (documents/, ledger/, manifest.json, rejects.jsonl, report.html), "
                    "or s3://bucket/prefix")


RUN_MODULE = {"pretrain": "pretrain", "sft": "sft", "curate": "curate"}  # each run: a module of its own
