"""``tokenmill synth rephrase|distill``: thin over :mod:`tokenmill.synth`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenmill.errors import ConfigError, UsageError
from tokenmill.job.options import parse_size


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories or globs")
    p.add_argument("--out", required=True, help="output directory, or s3://bucket/prefix")
    p.add_argument("--server", required=True, help="base URL of an OpenAI-compatible server, e.g. http://localhost:8000")
    p.add_argument("--model", required=True, help="model name as the server lists it (GET /v1/models)")
    p.add_argument("--prompt-file", help="a prompt template file replacing the built-in one")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    p.add_argument("--max-tokens", type=int, default=1024, help="most tokens generated per request (default 1024)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="generation seed sent to the server (default 0)")
    p.add_argument("--retries", type=int, default=5, help="retries on 429/5xx/timeouts (default 5)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default 300)")
    p.add_argument("--cache-dir", help="response cache shared across runs (default: ~/.cache/tokenmill/synth)")
    p.add_argument("--unit-bytes", default="8MiB", help="work unit size (default 8MiB): each unit commits on its own")
    p.add_argument("--overwrite", action="store_true", help="start an existing tokenmill output directory again")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("synth", help="synthetic data through an OpenAI-compatible inference server")
    ssub = p.add_subparsers(dest="synth", required=True, metavar="WHAT")
    r = ssub.add_parser("rephrase", help="rewrite documents in a style (WRAP): wikipedia, qa, easy, hard")
    _common(r)
    r.add_argument("--style", default="wikipedia", help="wikipedia, qa, easy or hard (default wikipedia)")
    r.add_argument("--chunk-chars", type=int, default=6000, help="longest piece sent at once (split on paragraphs)")
    d = ssub.add_parser("distill", help="a teacher answers each prompt; reasoning kept; answers checked when known")
    _common(d)
    d.add_argument("--samples", type=int, default=1, help="answers drawn per prompt with a known answer (default 1)")


def _check_flags(args: argparse.Namespace) -> None:
    """Bad numbers and a cache path that is a file are usage errors, before the server is asked anything."""
    # the synth modules here, not at the top: build_parser imports this module for every command it does not
    # define itself, and tokenmill.synth.client alone takes 0.1 s to import
    from tokenmill.synth.client import settings_problems

    problems = settings_problems(retries=args.retries, timeout=args.timeout, concurrency=args.concurrency,
                                 cache_dir=Path(args.cache_dir) if args.cache_dir else None)
    for flag, value in (("--max-tokens", args.max_tokens), ("--samples", getattr(args, "samples", 1)),
                        ("--chunk-chars", getattr(args, "chunk_chars", 1))):
        if value < 1:
            problems.append(f"{flag}: expected a whole number >= 1, got {value}")
    if problems:
        raise UsageError("; ".join(problems))


def cmd_synth(args: argparse.Namespace) -> int:
    from tokenmill.engine.store import shown
    from tokenmill.synth.client import Client, Generation
    from tokenmill.synth.run import print_synth_summary

    _check_flags(args)
    try:
        unit_bytes = parse_size(args.unit_bytes)
    except ValueError as exc:
        raise ConfigError(f"--unit-bytes: {exc}") from exc
    client = Client(args.server, args.model, Generation(args.max_tokens, args.temperature, args.top_p, args.seed),
                    concurrency=args.concurrency, retries=args.retries, timeout=args.timeout,
                    cache_dir=Path(args.cache_dir) if args.cache_dir else None)
    progress = False if args.no_progress else None
    if args.synth == "rephrase":
        from tokenmill.synth.rephrase import rephrase

        manifest = rephrase(args.inputs, out=args.out, client=client, style=args.style, prompt_file=args.prompt_file,
                            chunk_chars=args.chunk_chars, unit_bytes=unit_bytes, overwrite=args.overwrite,
                            progress=progress)
    else:
        from tokenmill.synth.distill import distill

        manifest = distill(args.inputs, out=args.out, client=client, samples=args.samples,
                           prompt_file=args.prompt_file, unit_bytes=unit_bytes, overwrite=args.overwrite,
                           progress=progress)
    print_synth_summary(manifest, shown(args.out))
    return 0
