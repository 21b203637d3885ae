"""``tokenmill funnel DIR``: a curate run's funnel recomputed from its ledger, optionally with other thresholds."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from tokenmill.curate.report.funnel import parse_sets, recompute, render_funnel
from tokenmill.job.options import PrintOptions, add_flags, option, paths


@dataclass(frozen=True, kw_only=True)
class FunnelOptions(PrintOptions):
    """``tokenmill funnel``."""

    sets: tuple[str, ...] = option((), "change one step parameter (repeatable), e.g. gopher_quality.min_stop_words=3",
                                   paths, kind="repeat", cli="--set", metavar="STEP.PARAM=VALUE")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("funnel", help="recompute a run's funnel from its ledger, optionally with other thresholds")
    p.add_argument("directory", metavar="DIR")
    add_flags(p, FunnelOptions)


def run(args: argparse.Namespace) -> int:
    options = FunnelOptions.from_flags(args)
    funnel = recompute(args.directory, parse_sets(list(options.sets)))
    print(json.dumps(funnel, indent=2) if options.json else render_funnel(funnel))
    return 0
