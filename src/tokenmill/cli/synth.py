"""``tokenmill synth rephrase|distill``: thin over :mod:`tokenmill.synth`; their options declared once, here."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmill.engine.store import shown
from tokenmill.errors import UsageError
from tokenmill.job.options import JobOptions, add_options, integer, number, option, positive_size, text
from tokenmill.selection import render_plan
from tokenmill.synth.client import Client, Generation, settings_problems
from tokenmill.synth.distill import distill
from tokenmill.synth.rephrase import rephrase
from tokenmill.synth.run import print_synth_summary


@dataclass(frozen=True, kw_only=True)
class SynthOptions(JobOptions):
    """What both synth commands take: the job flags, the server and the generation."""
    unit_bytes: int | None = option(8 << 20, "work unit size (default 8MiB): each unit commits on its own",
                                    positive_size, metavar="SIZE")
    server: str | None = option(None, "base URL of an OpenAI-compatible server, e.g. http://localhost:8000", text,
                                metavar="URL", required=True, fingerprint=False)
    model: str | None = option(None, "model name as the server lists it (GET /v1/models)", text, metavar="NAME",
                               required=True)
    prompt_file: str | None = option(None, "a prompt template file replacing the built-in one", text, metavar="FILE")
    concurrency: int = option(8, "requests in flight (default 8)", integer, metavar="N", parse=int, fingerprint=False)
    max_tokens: int = option(1024, "most tokens generated per request (default 1024)", integer, metavar="N", parse=int)
    temperature: float = option(0.7, "sampling temperature (default 0.7)", number, metavar="T", parse=float)
    top_p: float = option(1.0, "nucleus sampling share (default 1.0)", number, metavar="P", parse=float)
    seed: int = option(0, "generation seed sent to the server (default 0)", integer, metavar="S", parse=int)
    retries: int = option(5, "retries on 429/5xx/timeouts (default 5)", integer, metavar="N", parse=int,
                          fingerprint=False)
    timeout: float = option(300.0, "seconds per request (default 300)", number, metavar="SECONDS", parse=float,
                            fingerprint=False)
    cache_dir: str | None = option(None, "response cache shared across runs (default: ~/.cache/tokenmill/synth)", text,
                                   metavar="DIR", fingerprint=False)


@dataclass(frozen=True, kw_only=True)
class RephraseOptions(SynthOptions):
    """``tokenmill synth rephrase``."""
    style: str = option("wikipedia", "wikipedia, qa, easy or hard (default wikipedia)", text, metavar="STYLE")
    chunk_chars: int = option(6000, "longest piece sent at once (split on paragraphs)", integer, metavar="N", parse=int)


@dataclass(frozen=True, kw_only=True)
class DistillOptions(SynthOptions):
    """``tokenmill synth distill``."""
    samples: int = option(1, "answers drawn per prompt with a known answer (default 1)", integer, metavar="N", parse=int)


OPTIONS = {"rephrase": RephraseOptions, "distill": DistillOptions}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("synth", help="synthetic data through an OpenAI-compatible inference server")
    ssub = p.add_subparsers(dest="synth", required=True, metavar="WHAT")
    r = ssub.add_parser("rephrase", help="rewrite documents in a style (WRAP): wikipedia, qa, easy, hard")
    d = ssub.add_parser("distill", help="a teacher answers each prompt; reasoning kept; answers checked when known")
    for kind, q in (("rephrase", r), ("distill", d)):
        q.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories or globs")
        q.add_argument("--out", required=True, help="output directory, or s3://bucket/prefix")
        add_options(q, f"synth {kind}", OPTIONS[kind])


def _check_flags(options: SynthOptions) -> None:
    """Bad numbers and a cache path that is a file are usage errors, before the server is asked anything."""
    # the synth modules here, not at the top: build_parser imports this module for every command it does not
    # define itself, and tokenmill.synth.client alone takes 0.1 s to import

    problems = settings_problems(retries=options.retries, timeout=options.timeout, concurrency=options.concurrency,
                                 cache_dir=Path(options.cache_dir) if options.cache_dir else None)
    for flag, value in (("--max-tokens", options.max_tokens), ("--samples", getattr(options, "samples", 1)),
                        ("--chunk-chars", getattr(options, "chunk_chars", 1))):
        if value < 1:
            problems.append(f"{flag}: expected a whole number >= 1, got {value}")
    if problems:
        raise UsageError("; ".join(problems))


def run(args: argparse.Namespace) -> int:
    options = OPTIONS[args.synth].from_flags(args)
    _check_flags(options)
    client = Client(options.server, options.model,
                    Generation(options.max_tokens, options.temperature, options.top_p, options.seed),
                    concurrency=options.concurrency, retries=options.retries, timeout=options.timeout,
                    cache_dir=Path(options.cache_dir) if options.cache_dir else None)
    if args.synth == "rephrase":

        manifest = rephrase(args.inputs, out=args.out, client=client, style=options.style,
                            prompt_file=options.prompt_file, chunk_chars=options.chunk_chars, options=options)
    else:

        manifest = distill(args.inputs, out=args.out, client=client, samples=options.samples,
                           prompt_file=options.prompt_file, options=options)
    if options.dry_run:
        print(render_plan(manifest))
        return 0
    print_synth_summary(manifest, shown(args.out))
    return 0
