"""``tokenmill card DIR``: rebuild a run's data card (``DIR/datacard.md``, ``DIR/datacard.json``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("card", help="rebuild a run's data card (datacard.md, a Hugging Face dataset card, and "
                                    "datacard.json) from its manifest and ledger")
    p.add_argument("directory", metavar="DIR", help="output directory of a tokenmill curate or pretrain run")


def cmd_card(args: argparse.Namespace) -> int:
    from tokenmill.report.datacard import rebuild

    path = rebuild(args.directory)
    print(f"data card: {path} and {path.with_suffix('.json')}")
    for warning in json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
