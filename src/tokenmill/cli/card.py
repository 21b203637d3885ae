"""``tokenmill card DIR``: rebuild a run's data card (``DIR/datacard.md``, ``DIR/datacard.json``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tokenmill.engine.outdir import hold_finished, is_tokenmill_output
from tokenmill.engine.store import hold_store, is_remote, local_copy, open_store, publish_card
from tokenmill.errors import ConfigError, InputError
from tokenmill.job.options import add_job_flags
from tokenmill.report.datacard import card_data, read_manifest, rebuild


def add_parser(sub: Any) -> None:
    """The ``card`` parser (its job flags are added by the command line: the report package sits below the job
    driver's)."""
    p = sub.add_parser("card", help="rebuild a run's data card (datacard.md, a Hugging Face dataset card, and "
                                    "datacard.json) from its manifest and ledger")
    p.add_argument("directory", metavar="DIR", help="output directory of a tokenmill curate or pretrain run, or its "
                   "s3://bucket/prefix; the card is written into that run, recorded as its files (its manifest is the "
                   "envelope: the card has none of its own, nor a card of a card)")
    add_job_flags(p, "card", "dry_run")


def run(args: argparse.Namespace) -> int:
    """Held as every output is (``engine/outdir.py``): only a directory a tokenmill run wrote, never while a run
    writes it, never over a ``datacard.*`` of the user's; the card is recorded as written (``--overwrite``
    removes it)."""
    if is_remote(args.directory):
        return _card_remote(args.directory, dry_run=args.dry_run)
    if not Path(args.directory).is_dir():
        raise InputError(f"{args.directory}: no such directory, so no manifest.json; give the output directory of a "
                         "tokenmill curate or pretrain run")
    if args.dry_run:
        return _dry_run(Path(args.directory))
    with hold_finished(args.directory, command="card", names=("datacard.md", "datacard.json")):
        path = rebuild(args.directory)
    print(f"data card: {path} and {path.with_suffix('.json')}")
    for warning in json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _dry_run(directory: Path) -> int:
    """What ``tokenmill card DIR`` would write, from the run's records, with the same refusals; nothing written."""
    if not is_tokenmill_output(directory):
        raise ConfigError(f"{directory} is not a tokenmill output; `tokenmill card` writes only into a directory a "
                          "tokenmill run wrote")
    data = card_data(directory, read_manifest(directory))
    print(f"dry run: `tokenmill card` would write {directory / 'datacard.md'} and {directory / 'datacard.json'}: "
          f"license {data['license']}, {data['documents']:,} of {data['input_records']:,} records kept, "
          f"{len(data['sources'])} source(s) (nothing written)")
    for warning in data["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _card_remote(url: str, *, dry_run: bool) -> int:
    """``tokenmill card s3://bucket/prefix``: the card of a finished run on object storage, made from its local
    copy (``store.local_copy``) and uploaded under the prefix's lock object; refused, as locally, for a prefix
    tokenmill did not write and over a ``datacard.*`` there that no run published (a user's own)."""
    store = open_store(url, role="input")
    local = local_copy(url)  # refused when the prefix holds no finished run (no manifest.json)
    if dry_run:
        data = card_data(local, read_manifest(local))
        print(f"dry run: `tokenmill card` would write {store.where('datacard.md')} and {store.where('datacard.json')}: "
              f"license {data['license']}, {data['documents']:,} of {data['input_records']:,} records kept "
              "(nothing written)")
        return 0
    with hold_store(store):
        names = ("datacard.md", "datacard.json")
        publish_card(store, local, names, lambda: rebuild(local))
    print(f"data card: {store.where('datacard.md')} and {store.where('datacard.json')}")
    for warning in json.loads((local / "datacard.json").read_text(encoding="utf-8"))["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
