"""The ``tokenmill`` command: one entry point, subcommands thin over the library.

The commands with options of their own are modules of this package (``cli/<command>.py``: its parser and
its run), imported only when the command line names them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tokenmill import __version__
from tokenmill._arrow import skip_pandas_probe
from tokenmill.errors import ConfigError, TokenmillError, UsageError
from tokenmill.job.early import start_fork_server
from tokenmill.job.invocation import invoked
from tokenmill.job.options import (
    COMMAND_OPTIONS,
    CurateOptions,
    JobOptions,
    PretrainOptions,
    SftJobOptions,
    add_flags,
    add_job_flags,
    checked_flags,
    command_problems,
    file_rules,
    flag_values,
    not_taken_help,
    positive_size,
)
from tokenmill.sft.options import SftOptions

DESCRIPTION = "tokenmill: raw text in, training-ready token shards out (one command, subcommands thin over the library)."
EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2  # 1: data or configuration errors; 2: usage errors (as argparse)
EXIT_PIPE = 141  # the reader of our output went away (``| head``): 128 + SIGPIPE, as shell tools exit
EXIT_INTERRUPTED = 130
DEFAULT_TOKENIZER_WARNING = (
    "warning: no --tokenizer given: using the embedded default cl100k_im. Its ids fit inside most larger "
    "vocabularies, so a model with another tokenizer would train on the wrong ids without any error. Pass "
    "--tokenizer with your model's tokenizer (or --tokenizer default to choose the embedded one)."
)


def _add_run_options(p: argparse.ArgumentParser, options: type, *, skip: tuple[str, ...] = ()) -> None:
    """The options of the two token tracks: their options class's flags, object storage for ``--out``."""
    _add_job_options(p, options, out_help="output directory (shards, manifest.json, rejects.jsonl), or s3://bucket/prefix",
                     skip=skip)
    p.add_argument("--work-dir", metavar="DIR",
                   help="with an s3:// --out: the local directory units are staged in (default under $TOKENMILL_CACHE)")
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                   help="with an s3:// --out: an fsspec/s3fs option, e.g. endpoint_url=http://localhost:9000 (repeatable)")


def _add_job_options(p: argparse.ArgumentParser, options: type, *, out_help: str, other: str = "other track",
                     skip: tuple[str, ...] = ()) -> None:
    """What every command that reads inputs and writes ``--out`` takes: the inputs, ``--out``, ``--config``,
    the engine, and one flag per field of its options class (:mod:`tokenmill.job.options`, declared there once)."""
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="files, directories, globs or fsspec URLs")
    p.add_argument("--out", help=out_help)
    p.add_argument("--config", help="YAML pipeline file (flags override it)")
    _add_engine_options(p)
    add_flags(p, options, skip=skip, other=other)


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["local", "ray"],
                   help="where units run: a local process pool (default) or a Ray cluster (needs tokenmill[ray]); "
                        "overrides engine.name of --config")
    p.add_argument("--ray-address", help="join this Ray cluster, e.g. auto or HEAD:6379 (default with --engine ray: "
                   "start a local one); overrides engine.address of --config")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; ``command``: the command about to be parsed, when it is one defined here (the
    commands defined in their own modules are then left out, and so are those modules' imports: a tenth of a
    second of a small run's start-up)."""
    parser = argparse.ArgumentParser(prog="tokenmill", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"tokenmill {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("inspect", help="detect each input's format and kind (pretrain / sft / preference / unknown)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument("--sample", type=int, default=200, help="records sampled per input (default 200)")
    p.add_argument("--text-mode", default="auto", choices=["auto", "file", "line", "paragraph"],
                   help="documents in plain-text inputs: one per file, line or paragraph (default auto)")

    p = sub.add_parser("pretrain", help="tokenize a document corpus into token shards (every token trained)")
    _add_run_options(p, PretrainOptions)

    p = sub.add_parser("sft", help="render conversations with the chat template into token shards with loss masks")
    _add_run_options(p, SftJobOptions, skip=("text_mode",))
    add_flags(p, SftOptions)  # the sft: section of --config
    p.epilog = not_taken_help("sft")

    p = sub.add_parser("curate", help="filter and clean documents: curated documents, decision ledger, funnel, report")
    _add_job_options(p, CurateOptions, other="SFT track",
                     out_help="output directory (documents/, ledger/, manifest.json, rejects.jsonl, report.html), "
                     "or s3://bucket/prefix")

    p = sub.add_parser("funnel", help="recompute a run's funnel from its ledger, optionally with other thresholds")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="STEP.PARAM=VALUE",
                   help="change one step parameter (repeatable), e.g. gopher_quality.min_stop_words=3")
    p.add_argument("--json", action="store_true", help="print the funnel as JSON")

    p = sub.add_parser("validate", help="check a pipeline file, its inputs and its schema mappings; exit 1 on problems")
    p.add_argument("pipeline", metavar="PIPELINE", help="the YAML pipeline file")

    p = sub.add_parser("export", help="export shards to Megatron .bin/.idx, a datasets directory or a flat token file")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--to", required=True, choices=["megatron", "hf", "bin"], help="target format")
    p.add_argument("--out", required=True, help="output path (prefix for megatron), or s3://bucket/path (written "
                   "locally, then uploaded; credentials and endpoint from the environment, as s3fs reads them)")
    p.add_argument("--seq-len", type=int, help="fixed-length samples (concatenate and chunk)")
    add_job_flags(p, "export", "overwrite", "dry_run")

    p = sub.add_parser("audit", help="verify a shard directory and show decoded examples with trained spans marked")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--n", type=int, default=3, help="examples to show (default 3)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--tokenizer", help="tokenizer to decode with (default: the one named in the shards)")
    p.add_argument("--source", action="append", default=[], metavar="NAME",
                   help="show documents of this source only: its path, file name or a glob ('*gsm8k*'); repeatable")
    p.add_argument("--id", action="append", default=[], dest="ids", metavar="ID",
                   help="show the document with this id; repeatable")
    p.add_argument("--shape", metavar="SHAPE",
                   help="show documents of this shape: untrained (no trained token), unstopped (a trained span "
                        "not ending in a stop token), multi-turn (two trained spans or more), longest, shortest")

    p = sub.add_parser("stats", help="tokens, documents, supervised share and packing numbers of a shard directory")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--seq-len", type=int, help="sequence length for the packing numbers")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = sub.add_parser("bench", help="measured benchmarks")
    bsub = p.add_subparsers(dest="bench", required=True, metavar="WHAT")
    b = bsub.add_parser("formats", help="disk size, write time, scan speed, RSS and random access per storage format")
    b.add_argument("inputs", nargs="*", metavar="INPUT", help="documents to use (default: a generated corpus)")
    b.add_argument("--mb", type=float, default=50.0, help="corpus size in MB (default 50)")
    b.add_argument("--workdir", help="where to write the formats (default: a temporary directory)")

    p = sub.add_parser("demo", help="both tracks end to end on a generated mixed input with the embedded tokenizer")
    p.add_argument("--out", default="tokenmill-demo", help="output directory (default ./tokenmill-demo), or s3://bucket/prefix")
    add_job_flags(p, "demo", "dry_run")
    if command in sub.choices:
        return parser

    from tokenmill.cli import decontaminate as decontam_cli
    from tokenmill.cli import quality as quality_cli

    quality_cli.add_parser(sub)
    decontam_cli.add_parser(sub)

    from tokenmill.cli import synth as synth_cli

    synth_cli.add_parser(sub)

    from tokenmill.cli import sft_select as select_cli

    select_cli.add_parser(sub)
    from tokenmill.cli import pref as pref_cli

    pref_cli.add_parser(sub)
    from tokenmill.cli import select as dsir_cli

    dsir_cli.add_parser(sub)
    from tokenmill.cli import plan as plan_cli

    plan_cli.add_parser(sub)

    from tokenmill.cli import card as card_cli

    card_cli.add_parser(sub)
    add_job_flags(sub.choices["card"], "card", "dry_run")
    from tokenmill.cli import lm as lm_cli

    lm_cli.add_parser(sub)
    return parser


def _version() -> str:
    return __version__


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """Pipeline file first, then CLI flags on top; what the command takes is what its options class declares."""
    from tokenmill.config import load_config, validate

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


def _is_url(out: Any) -> bool:
    from tokenmill.engine.store import is_remote

    return is_remote(out)


def _out(args: argparse.Namespace, cfg: dict[str, Any]) -> Any:
    """``--out`` as the tracks take it: a directory, or a ``RemoteOutput`` with its work dir and storage options."""
    options = _storage_options(args.storage_option or [])
    if not _is_url(cfg["out"]):
        if options or args.work_dir:
            raise UsageError("--work-dir and --storage-option apply to an object-storage --out (s3://bucket/prefix)")
        return cfg["out"]
    from tokenmill.engine.store import RemoteOutput

    return RemoteOutput(cfg["out"], storage_options=options, work_dir=args.work_dir)


def _storage_options(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (values read as YAML: ``use_ssl=false``; dotted keys nest: ``client_kwargs.region_name=x``)."""
    import yaml

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


def _executor(args: argparse.Namespace, cfg: dict[str, Any]) -> dict[str, Any]:
    """``workers=`` for the local pool, or ``executor=`` a Ray executor: the flags first, then ``engine:``."""
    engine = cfg.get("engine") or {}
    name = args.engine or engine.get("name", "local")
    workers = args.workers or engine.get("workers") or cfg.get("workers")
    if name != "ray":
        if args.ray_address:
            raise TokenmillError("--ray-address needs --engine ray (or engine: {name: ray} in --config)")
        return {"workers": workers}
    from tokenmill.engine.ray import RayExecutor

    return {"executor": RayExecutor(workers=workers, address=args.ray_address or engine.get("address"))}


def cmd_inspect(args: argparse.Namespace) -> int:
    from tokenmill.route import inspect, render_table

    routes = inspect(args.paths, sample=args.sample, text_mode=args.text_mode)
    if args.json:
        print(json.dumps([r.to_dict() for r in routes], indent=2, default=str))
    else:
        print(render_table(routes))
    return 0


def cmd_curate(args: argparse.Namespace) -> int:
    from tokenmill.curate.report.funnel import render_funnel
    from tokenmill.curate.workflows.curate import run_curate
    from tokenmill.engine.store import shown

    cfg = _settings(args)
    manifest = run_curate(
        cfg["inputs"], out=cfg["out"], steps=cfg.get("steps"), preset=cfg.get("preset"), **_executor(args, cfg),
        quality_model=cfg.get("quality_model"), robots_snapshot=cfg.get("robots_snapshot"), schemas=cfg.get("schema"),
        score_removed=not args.score_survivors_only, **_job(args, cfg).run_kwargs(),
    )
    if args.dry_run:
        return _print_plan(manifest)
    out = shown(cfg["out"])
    c = manifest["counts"]
    print(f"curate: {c['kept']:,} kept of {c['input']:,} records in {len(manifest['documents'])} file(s) -> {out / 'documents'}")
    print(render_funnel(manifest["funnel"]))
    print(manifest["identity"])
    changed = {k: v for k, v in c["extra"].items() if not k.startswith("skipped:")}
    if changed:
        print("rewritten: " + ", ".join(f"{k} {v:,}" for k, v in sorted(changed.items())))
    if manifest.get("rejects_file"):
        print(f"rejects: {out / manifest['rejects_file']}")
    print(f"ledger: {out / 'ledger'}\nreport: {out / 'report.html'}\nmanifest: {out / 'manifest.json'}")
    return 0


def cmd_funnel(args: argparse.Namespace) -> int:
    from tokenmill.curate.report.funnel import parse_sets, recompute, render_funnel

    funnel = recompute(args.directory, parse_sets(args.sets))
    print(json.dumps(funnel, indent=2) if args.json else render_funnel(funnel))
    return 0


def cmd_pretrain(args: argparse.Namespace) -> int:
    from tokenmill.curate.workflows.presets import refuse_in_pretrain, step_specs
    from tokenmill.pretrain import run_pretrain
    from tokenmill.steps.build import build_steps
    from tokenmill.track import print_summary

    cfg = _settings(args)
    refuse_in_pretrain(cfg.get("preset"))
    specs = step_specs(cfg.get("preset"), cfg.get("steps"), quality_model=cfg.get("quality_model"),
                       robots_snapshot=cfg.get("robots_snapshot"))
    steps = build_steps(specs, source=args.config or "config")
    manifest = run_pretrain(
        cfg["inputs"], out=_out(args, cfg), tokenizer=cfg.get("tokenizer", "default"), **_executor(args, cfg),
        shard_tokens=cfg.get("shard_tokens", 1 << 28), steps=steps, schemas=cfg.get("schema"),
        config={"steps": specs, "preset": cfg.get("preset"), "shard_tokens": cfg.get("shard_tokens", 1 << 28)},
        eos=cfg.get("eos"), **_job(args, cfg).run_kwargs(), **_split(cfg),
    )
    if args.dry_run:
        return _print_plan(manifest)
    print_summary(manifest, cfg["out"])
    if manifest.get("funnel"):
        from tokenmill.curate.report.funnel import render_funnel

        print(render_funnel(manifest["funnel"]))
    return 0


def _job(args: argparse.Namespace, cfg: dict) -> Any:
    """The job options of the run: the checked settings (file, then flags), and the flag-only ones."""
    return JobOptions.from_settings({**flag_values(args, JobOptions), **cfg})


def _split(cfg: dict) -> dict[str, Any]:
    """The validation split of a track run (see ``tokenmill.split``)."""
    return {"val_fraction": cfg.get("val_fraction"), "val_count": cfg.get("val_count"),
            "val_seed": cfg.get("val_seed", 0)}


def _print_plan(plan: dict) -> int:
    from tokenmill.selection import render_plan

    print(render_plan(plan))
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from tokenmill.sft.corpus import build_sft_steps as build_steps
    from tokenmill.sft.run import run_sft
    from tokenmill.track import print_summary

    cfg = _settings(args)
    steps = build_steps(cfg.get("steps"), source=args.config or "config")
    sft = {**(cfg.get("sft") or {}), **checked_flags(args, SftOptions)}  # the sft: section, flags on top
    manifest = run_sft(
        cfg["inputs"], out=_out(args, cfg), tokenizer=cfg.get("tokenizer", "default"), **_executor(args, cfg),
        shard_tokens=cfg.get("shard_tokens", 1 << 28), schemas=cfg.get("schema"), steps=steps,
        **{k: v for k, v in _job(args, cfg).run_kwargs().items() if k != "text_mode"}, **_split(cfg), **sft,
    )
    if args.dry_run:
        return _print_plan(manifest)
    print_summary(manifest, cfg["out"])
    from tokenmill.sft.report import render_report

    print(render_report(manifest.get("report", {})))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from tokenmill.check import check_pipeline

    problems, notes = check_pipeline(args.pipeline)
    for note in notes:
        print(f"  {note}")
    if problems:
        print(f"{args.pipeline}: {len(problems)} problem(s)")
        print("\n".join(f"  - {p}" for p in problems))
        return 1
    print(f"{args.pipeline}: OK")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from tokenmill.shards.export import export

    written = export(args.directory, to=args.to, out=args.out, seq_len=args.seq_len, overwrite=bool(args.overwrite),
                     dry_run=bool(args.dry_run))
    if args.dry_run:
        print(f"dry run: `tokenmill export` would write {args.directory} as {args.to}: {written['n_sequences']:,} "
              f"sequences, {written['n_tokens']:,} tokens -> {', '.join(written['paths'])} (nothing written)")
        return 0
    print(f"exported {args.directory} as {args.to}: {written['n_sequences']:,} sequences, "
          f"{written['n_tokens']:,} tokens -> {', '.join(written['paths'])}")
    if written.get("dtype_note"):
        print(f"token dtype: {written['dtype_note']}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from tokenmill.shards.audit import audit, render_audit
    from tokenmill.shards.pick import Pick

    pick = Pick(tuple(args.source), tuple(args.ids), args.shape)
    result = audit(args.directory, n=args.n, tokenizer=args.tokenizer, pick=pick)
    print(json.dumps(result, indent=2) if args.json else render_audit(result, color=sys.stdout.isatty()))
    return 0 if not result["problems"] else 1


def cmd_stats(args: argparse.Namespace) -> int:
    from tokenmill.loader.stats import render_stats, shard_stats

    result = shard_stats(args.directory, seq_len=args.seq_len)
    print(json.dumps(result, indent=2) if args.json else render_stats(result))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from tokenmill.bench.formats import bench_formats

    print(bench_formats(args.inputs, mb=args.mb, workdir=args.workdir))
    return 0


def cmd_quality(args: argparse.Namespace) -> int:
    from tokenmill.cli.quality import cmd_quality as run

    return run(args)


def cmd_decontaminate(args: argparse.Namespace) -> int:
    from tokenmill.cli.decontaminate import cmd_decontaminate as run

    return run(args)


def cmd_card(args: argparse.Namespace) -> int:
    from tokenmill.cli.card import cmd_card as run

    return run(args)


def cmd_synth(args: argparse.Namespace) -> int:
    from tokenmill.cli.synth import cmd_synth as run

    return run(args)


def cmd_plan(args: argparse.Namespace) -> int:
    from tokenmill.cli.plan import cmd_plan as run

    return run(args)


def cmd_sft_select(args: argparse.Namespace) -> int:
    from tokenmill.cli.sft_select import cmd_select

    return cmd_select(args)


def cmd_pref(args: argparse.Namespace) -> int:
    from tokenmill.cli.pref import cmd_pref as run

    cfg = _settings(args)
    return run(args, cfg, out=cfg["out"], engine=_executor(args, cfg))


def cmd_select(args: argparse.Namespace) -> int:
    from tokenmill.cli.select import cmd_select as run

    return run(args)


def cmd_lm(args: argparse.Namespace) -> int:
    from tokenmill.cli.lm import cmd_lm as run

    return run(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from tokenmill.demo import run_demo

    run_demo(args.out, dry_run=bool(args.dry_run))
    return 0


COMMANDS = {
    "inspect": cmd_inspect, "pretrain": cmd_pretrain, "curate": cmd_curate, "funnel": cmd_funnel, "sft": cmd_sft,
    "validate": cmd_validate, "export": cmd_export, "audit": cmd_audit, "stats": cmd_stats, "bench": cmd_bench,
    "demo": cmd_demo, "quality": cmd_quality, "decontaminate": cmd_decontaminate, "synth": cmd_synth,
    "card": cmd_card,
    "sft-select": cmd_sft_select, "plan": cmd_plan, "pref": cmd_pref, "select": cmd_select, "lm": cmd_lm,
}


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; the exit status is 0, 1 (data or configuration error) or 2 (usage error)."""
    command_line = argv is None  # the `tokenmill` command itself, not a caller's process
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["sft", "select"]:  # `tokenmill sft select ...`: a command of its own beside `tokenmill sft INPUT...`
        argv = ["sft-select", *argv[2:]]
    if argv[:1] == ["decontaminate"]:
        from tokenmill.cli.decontaminate import end_eval_list

        argv = end_eval_list(argv)
    try:
        parser = build_parser(argv[0] if argv else None)
        args, unknown = parser.parse_known_args(argv)  # argparse's own usage errors exit 2
        if unknown:
            raise UsageError(unknown_options(parser, args.command, unknown, args=args))
        if args.command in ("pretrain", "sft"):
            _start_early(args.command, args)
        if command_line:  # after the fork server's start: importing pyarrow here takes 0.15 s
            skip_pandas_probe(command=True)  # pyarrow's pandas probe is not needed: no user code runs here
        with invoked(getattr(args, "config", None)):  # the runs record the pipeline file and its digest
            code = COMMANDS[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except UsageError as exc:
        print(f"usage error: {exc}\n(run `tokenmill {args.command} -h` for the options)", file=sys.stderr)
        return EXIT_USAGE
    except TokenmillError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE
    except KeyboardInterrupt:
        print(f"interrupted: {_resume_hint(args)}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _resume_hint(args: argparse.Namespace) -> str:
    """How to go on after Ctrl-C: the same command resumes, but not with ``--overwrite``, which would remove
    what this run wrote and start over."""
    if getattr(args, "overwrite", False):
        return "run the same command again without --overwrite to resume (with it, the run starts over)"
    return "run the same command again to resume"


def unknown_options(parser: argparse.ArgumentParser, command: str, unknown: list[str],
                    args: argparse.Namespace | None = None) -> str:
    """What the command line held that the command does not take: a job flag the command refuses with its
    reason (``job/options.py``'s ``NOT_TAKEN``), else the closest option it does take (``--output`` -> ``--out``)."""
    import difflib

    from tokenmill.job.options import not_taken

    full = f"{command} {getattr(args, command, '')}".strip() if command in ("quality", "synth", "lm") else command
    refused = [f"{u.split('=', 1)[0]}: {not_taken(full, u.split('=', 1)[0])}" for u in unknown
               if u.startswith("--") and not_taken(full, u.split("=", 1)[0])]
    if refused:
        return f"`tokenmill {full}` does not take " + "; ".join(refused)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction) and a.dest == "command"
               ).choices[command]
    known = [o for a in sub._actions for o in a.option_strings if o.startswith("--")]
    words = []
    for given in [u for u in unknown if u.startswith("-")] or unknown:  # the options, not the values after them
        name = given.split("=", 1)[0]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6) if name.startswith("--") else []
        words.append(f"{given} (did you mean {close[0]}?)" if close else given)
    return f"`tokenmill {command.replace('sft-select', 'sft select')}` does not take {', '.join(words)}"


def _start_early(track: str, args: argparse.Namespace) -> None:
    """Start the run's fork server now, before the track's imports, when the run will use a pool
    (tokenmill/job/early.py). From the command line alone: with a pipeline file (which may name other inputs,
    tokenizer or workers, and is read later) the run starts its pool as before."""
    if args.config or args.dry_run or args.engine == "ray" or not args.inputs:
        return
    try:
        unit_bytes = positive_size(args.unit_bytes) if args.unit_bytes else None
    except ValueError:
        return  # the run reports it
    start_fork_server(track, args.inputs, workers=args.workers, unit_bytes=unit_bytes,
                      tokenizer=args.tokenizer or "default")


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not print a second BrokenPipeError."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout replaced by an object without a file descriptor
        pass

