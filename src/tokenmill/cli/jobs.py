"""What the commands that run a job from flags and a pipeline file share: their parsers' common arguments
(inputs, ``--out``, ``--config``, the engine), the settings (the file, then the flags on top, checked against
the command's options class), ``--out`` as the run takes it, and the executor.

Imported on the way to a token track's fork server (``cli/tracks.py``), so it stays light: the pipeline file's
schema, the object store and the plan renderer are imported where they are used.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tokenmill.engine.store import RemoteOutput, is_remote
from tokenmill.errors import ConfigError, TokenmillError, UsageError
from tokenmill.job.options import COMMAND_OPTIONS, JobOptions, add_flags, command_problems, file_rules, flag_values

DEFAULT_TOKENIZER_WARNING = (
    "warning: no --tokenizer given: using the embedded default cl100k_im. Its ids fit inside most larger "
    "vocabularies, so a model with another tokenizer would train on the wrong ids without any error. Pass "
    "--tokenizer with your model's tokenizer (or --tokenizer default to choose the embedded one)."
)


def add_run_options(p: argparse.ArgumentParser, options: type, *, skip: tuple[str, ...] = ()) -> None:
    """The options of the two token tracks: their options class's flags, object storage for ``--out``."""
    add_job_options(p, options, out_help="output directory (shards, manifest.json, rejects.jsonl), or s3://bucket/prefix",
                    skip=skip)
    p.add_argument("--work-dir", metavar="DIR",
                   help="with an s3:// --out: the local directory units are staged in (default under $TOKENMILL_CACHE)")
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                   help="with an s3:// --out: an fsspec/s3fs option, e.g. endpoint_url=http://localhost:9000 (repeatable)")


def add_job_options(p: argparse.ArgumentParser, options: type, *, out_help: str, other: str = "other track",
                    skip: tuple[str, ...] = ()) -> None:
    """What every command that reads inputs and writes ``--out`` takes: the inputs, ``--out``, ``--config``,
    the engine, and one flag per field of its options class (:mod:`tokenmill.job.options`, declared there once)."""
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="files, directories, globs or fsspec URLs")
    p.add_argument("--out", help=out_help)
    p.add_argument("--config", help="YAML pipeline file (flags override it)")
    add_engine_options(p)
    add_flags(p, options, skip=skip, other=other)


def add_engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["local", "ray"],
                   help="where units run: a local process pool (default) or a Ray cluster (needs tokenmill[ray]); "
                        "overrides engine.name of --config")
    p.add_argument("--ray-address", help="join this Ray cluster, e.g. auto or HEAD:6379 (default with --engine ray: "
                   "start a local one); overrides engine.address of --config")


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """Pipeline file first, then CLI flags on top; what the command takes is what its options class declares."""
    from tokenmill.config import load_config, validate  # the file's schema: numpy and pyarrow (the light path)

    options = COMMAND_OPTIONS[args.command]
    cfg: dict[str, Any] = load_config(args.config) if args.config else {}  # a bad file: ConfigError, exit 1
    in_file = file_rules(options)  # the options the file may hold; the others are flags only
    flags = {"inputs": args.inputs or None, "out": args.out,
             **{k: v for k, v in flag_values(args, options).items() if k in in_file}}
    flags = {k: v for k, v in flags.items() if v is not None}
    try:
        flags = validate(flags, source="command line")
    except ConfigError as exc:  # a bad flag value is a usage error (exit 2)
        raise UsageError(str(exc)) from None
    for given, other in (("val_fraction", "val_count"), ("val_count", "val_fraction")):
        if given in flags:
            cfg.pop(other, None)  # one way to split on the command line replaces the file's other one
    cfg.update(flags)
    problems = []
    documents = ("pretrain", "curate")  # a documents pipeline runs under either; its steps are checked where they run
    if cfg.get("track") not in (None, args.command) and not {cfg.get("track"), args.command} <= set(documents):
        problems.append(f"track: the pipeline file is for `tokenmill {cfg['track']}`, not `tokenmill {args.command}`")
    problems += command_problems(args.command, {k: v for k, v in cfg.items() if k != "track"})
    if problems:
        raise ConfigError([f"{args.config or 'command line'}: {p}" for p in problems])
    missing = [k for k in ("inputs", "out") if not cfg.get(k)]
    if missing:
        raise UsageError(f"missing {' and '.join(missing)}: give INPUT paths and --out DIR (or set them in --config)")
    if not cfg.get("tokenizer") and args.command != "curate":  # curate writes documents, not tokens
        print(DEFAULT_TOKENIZER_WARNING, file=sys.stderr)
    return cfg


def out(args: argparse.Namespace, cfg: dict[str, Any]) -> Any:
    """``--out`` as the tracks take it: a directory, or a ``RemoteOutput`` with its work dir and storage options."""
    options = storage_options(args.storage_option or [])
    if not is_remote(cfg["out"]):
        if options or args.work_dir:
            raise UsageError("--work-dir and --storage-option apply to an object-storage --out (s3://bucket/prefix)")
        return cfg["out"]
    return RemoteOutput(cfg["out"], storage_options=options, work_dir=args.work_dir)


def storage_options(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (values read as YAML: ``use_ssl=false``; dotted keys nest: ``client_kwargs.region_name=x``)."""
    import yaml  # only with the flag

    options: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"--storage-option {item!r}: expected KEY=VALUE, e.g. endpoint_url=http://localhost:9000")
        *parents, leaf = key.split(".")
        node = options
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = value if "://" in value else yaml.safe_load(value)
    return options


def executor(args: argparse.Namespace, cfg: dict[str, Any]) -> dict[str, Any]:
    """``workers=`` for the local pool, or ``executor=`` a Ray executor: the flags first, then ``engine:``."""
    engine = cfg.get("engine") or {}
    name = args.engine or engine.get("name", "local")
    workers = args.workers or engine.get("workers") or cfg.get("workers")
    if name != "ray":
        if args.ray_address:
            raise TokenmillError("--ray-address needs --engine ray (or engine: {name: ray} in --config)")
        return {"workers": workers}
    from tokenmill.engine.ray import RayExecutor  # the optional extra tokenmill[ray]

    return {"executor": RayExecutor(workers=workers, address=args.ray_address or engine.get("address"))}


def job_options(args: argparse.Namespace, cfg: dict) -> JobOptions:
    """The job options of the run: the checked settings (file, then flags), and the flag-only ones."""
    return JobOptions.from_settings({**flag_values(args, JobOptions), **cfg})


def split(cfg: dict) -> dict[str, Any]:
    """The validation split of a track run (see ``tokenmill.split``)."""
    return {"val_fraction": cfg.get("val_fraction"), "val_count": cfg.get("val_count"),
            "val_seed": cfg.get("val_seed", 0)}


def print_plan(plan: dict) -> int:
    """A dry run's plan, as every job prints it."""
    from tokenmill.selection import render_plan  # numpy and pyarrow (the light path)

    print(render_plan(plan))
    return 0
