"""The ``tokenmill`` command: one entry point, subcommands thin over the library.

Each command is a module of this package (:data:`COMMANDS`): its parser (``add_parser``, the flags from its
options classes) and its run (``run``). Only the module of the command named on the command line is imported
(every command pays for what it runs: a small run's start-up is mostly imports), except a module that sets
``RUN_MODULE``: its parser is built, and a token track's fork server started, before that module's run is
imported (``cli/tracks.py``).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from types import ModuleType

from tokenmill import __version__
from tokenmill._arrow import skip_pandas_probe
from tokenmill.errors import TokenmillError, UsageError
from tokenmill.job.early import start_fork_server
from tokenmill.job.invocation import invoked
from tokenmill.job.options import not_taken, positive_size

DESCRIPTION = "tokenmill: raw text in, training-ready token shards out (one command, subcommands thin over the library)."
EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2  # 1: data or configuration errors; 2: usage errors (as argparse)
EXIT_PIPE = 141  # the reader of our output went away (``| head``): 128 + SIGPIPE, as shell tools exit
EXIT_INTERRUPTED = 130
# the commands, in the order `tokenmill -h` lists them, and the module of each (``tokenmill.cli.<module>``)
COMMANDS = {
    "inspect": "inputs", "pretrain": "tracks", "sft": "tracks", "curate": "tracks", "funnel": "funnel",
    "validate": "inputs", "export": "export", "audit": "shards", "stats": "shards", "bench": "bench", "demo": "demo",
    "quality": "quality", "decontaminate": "decontaminate", "synth": "synth", "sft-select": "sft_select",
    "pref": "pref", "select": "select", "plan": "plan", "card": "card", "lm": "lm",
}


def command_module(command: str) -> ModuleType:
    return importlib.import_module(f"tokenmill.cli.{COMMANDS[command]}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; ``command``: the command about to be parsed (only its module is imported and
    its parsers built; any other value builds them all)."""
    parser = argparse.ArgumentParser(prog="tokenmill", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"tokenmill {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for module in wanted:
        importlib.import_module(f"tokenmill.cli.{module}").add_parser(sub)
    return parser


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command: its module's ``run``, or that of the module its ``RUN_MODULE`` names for it (imported
    now)."""
    module = command_module(args.command)
    runs = getattr(module, "RUN_MODULE", {}).get(args.command)
    return (importlib.import_module(f"tokenmill.cli.{runs}") if runs else module).run(args)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; the exit status is 0, 1 (data or configuration error) or 2 (usage error)."""
    command_line = argv is None  # the `tokenmill` command itself, not a caller's process
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["sft", "select"]:  # `tokenmill sft select ...`: a command of its own beside `tokenmill sft INPUT...`
        argv = ["sft-select", *argv[2:]]
    if argv[:1] == ["decontaminate"]:
        argv = command_module("decontaminate").end_eval_list(argv)
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
            code = run_command(args)
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
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout replaced by an object without a file descriptor
        pass

