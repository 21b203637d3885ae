"""Options as data: each option of the job driver declared once, in a frozen dataclass, from which the
command-line flags, the pipeline file's keys (and so ``tokenmill validate``), the API's keyword
arguments and the fingerprint are all derived, so the three cannot disagree.

A field's metadata (:func:`option`) holds its help text, its check (a value from the pipeline file or the
command line -> the value, or ``ValueError``), how the flag is spelled and read (a switch, a repeated
flag, a value with a metavar), whether the pipeline file may set it, and whether it enters the run's
fingerprint (what a resume must match: not ``workers``, ``overwrite``, ``dry_run`` or progress).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from tokenmill.errors import UsageError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_FACTORS = {"": 1, "B": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4,
            "KI": 1 << 10, "MI": 1 << 20, "GI": 1 << 30, "TI": 1 << 40}


def parse_size(value: Any) -> int:
    """``64MiB`` -> 67108864; plain integers pass through. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError("expected a size")
    if isinstance(value, int):
        return value
    m = _SIZE.match(str(value))
    if not m:
        raise ValueError(f"expected a size like 64MiB or 1000000, got {value!r}")
    unit = (m.group(2) or "").upper().rstrip("B")
    return int(float(m.group(1)) * _FACTORS[unit])


def positive_size(v: Any) -> int:
    n = parse_size(v)
    if n <= 0:
        raise ValueError(f"expected a positive size, got {v!r}")
    return n


def positive_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"expected int, got {type(v).__name__} {v!r}")
    if v <= 0:
        raise ValueError(f"expected a positive number, got {v!r}")
    return v


def boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"expected bool, got {type(v).__name__} {v!r}")
    return v


def paths(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if not isinstance(v, list) or not all(isinstance(p, str) for p in v):
        raise ValueError("expected a path or a list of paths")
    return v


def choice(*options: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {v!r}")
        return v
    check.choices = options  # type: ignore[attr-defined]
    return check


def text(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected str, got {type(v).__name__} {v!r}")
    return v


def fraction(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
        raise ValueError(f"expected a fraction between 0 and 1 (exclusive), e.g. 0.05, got {v!r}")
    return float(v)


def seed(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"expected a non-negative integer, got {v!r}")
    return v


def non_negative(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"expected a whole number, 0 or more, got {v!r}")
    return v


def integer(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"expected a whole number, got {type(v).__name__} {v!r}")
    return v


def number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"expected a number, got {type(v).__name__} {v!r}")
    return float(v)


def ints(v: Any) -> tuple[int, ...]:
    if isinstance(v, (int, str)) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in v):
        raise ValueError(f"expected a list of non-negative integers, got {v!r}")
    return tuple(v)


@dataclass(frozen=True)
class Flag:
    """How one option is spelled and read (see the module docstring)."""

    help: str
    check: Callable[[Any], Any]
    metavar: str | None = None
    # "switch" (--name: True), "negate" (--no-name: False), "repeat" (--name A --name B), "list" (--name A B),
    # "extend" (--name A B --name C: one list), "value"
    kind: str = "value"
    cli: str | None = None  # the flag, when not ``--<name>`` (``--no-<name>`` for "negate")
    in_file: bool = True
    fingerprint: bool = True
    parse: Callable[[str], Any] | None = None  # how the command line's string becomes the value (int, float)
    required: bool = False  # the command line must give it (a command without a pipeline file)


def option(default: Any, help: str, check: Callable[[Any], Any], **flag: Any) -> Any:
    return field(default=default, metadata={"flag": Flag(help, check, **flag)})


def spelled(f: Any) -> str:
    """The flag of field ``f`` on the command line."""
    flag = _flag(f)
    return flag.cli or ("--no-" if flag.kind == "negate" else "--") + f.name.replace("_", "-")


def checked_flags(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The values of ``cls``'s flags given on the command line, each through its option's check (``--unit-bytes
    64MiB`` -> bytes); a bad value is a usage error naming the flag."""
    checked = {}
    for f in fields(cls):
        value = getattr(args, f.name, None)
        if value is None:
            continue
        try:
            checked[f.name] = _flag(f).check(value)
        except ValueError as exc:
            shown = " ".join(map(str, value)) if isinstance(value, list) else value
            raise UsageError(f"{spelled(f)} {shown}: {exc}") from None
    return checked


class Options:
    """What every options class derives from its fields: the options from settings or flags, the fingerprint,
    and the problems of its values (each field's own check)."""

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Any:
        """The options from checked settings (pipeline file, then flags on top), defaults for the rest."""
        given = {f.name: settings[f.name] for f in fields(cls) if settings.get(f.name) is not None}  # type: ignore[arg-type]
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})

    @classmethod
    def from_flags(cls, args: argparse.Namespace) -> Any:
        """The options given on the command line alone (a command without a pipeline file), each checked."""
        return cls.from_settings(checked_flags(args, cls))

    def fingerprinted(self) -> dict[str, Any]:
        """The options a resume must match."""
        return {f.name: getattr(self, f.name) for f in fields(self) if _flag(f).fingerprint}  # type: ignore[arg-type]

    def problems(self) -> list[str]:
        """``name=value: why`` for every value its field's check refuses (a None default left unset is fine)."""
        found = []
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            try:
                _flag(f).check(value)
            except ValueError as exc:
                found.append(f"{f.name}={value!r}: {exc}")
        return found


@dataclass(frozen=True, kw_only=True)
class PrintOptions(Options):
    """What the commands that print a result (``inspect``, ``funnel``, ``audit``, ``stats``, ``plan``) take."""

    json: bool = option(False, "print the result as JSON instead of a table", boolean, kind="switch", in_file=False,
                        fingerprint=False)


@dataclass(frozen=True, kw_only=True)
class JobOptions(Options):
    """What every command that reads inputs and writes ``--out`` takes; ``{other}`` in a help text is the
    kind of data the command refuses (``the other track``, ``the SFT track``)."""

    workers: int | None = option(None, "worker processes (default: all cores, or every CPU of the Ray cluster)",
                                 positive_int, metavar="N", fingerprint=False)
    force: bool = option(False, "process inputs the router assigns to the {other}", boolean, kind="switch")
    overwrite: bool = option(False, "start again: remove what an earlier tokenmill run wrote in --out (nothing else)",
                             boolean, kind="switch", fingerprint=False)
    unit_bytes: int | None = option(None, "work unit size, e.g. 64MiB (JSONL split by byte range, Parquet by row "
                                    "group; files under 1/256 of it share units); default: the inputs' total "
                                    "size / 16, between 4 MiB and 64 MiB",
                                    positive_size, metavar="SIZE")
    text_mode: str = option("auto", "documents in plain-text inputs: one per file, line or paragraph (default auto)",
                            choice("auto", "file", "line", "paragraph"))
    exclude: tuple[str, ...] = option((), "leave out inputs whose path matches GLOB (repeatable), e.g. '*.warc.gz'",
                                      paths, metavar="GLOB", kind="repeat")
    skip_misrouted: bool = option(False, "leave out (and name in the manifest) inputs of the other kind instead of "
                                  "refusing the run", boolean, kind="switch")
    limit: int | None = option(None, "read only the first N records of every input (a trial run)", positive_int,
                               metavar="N")
    dry_run: bool = option(False, "route and plan, print what would run; write nothing", boolean, kind="switch",
                           in_file=False, fingerprint=False)
    no_progress: bool = option(False, "no progress bar", boolean, kind="switch", in_file=False, fingerprint=False)

    def run_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``run_pretrain``, ``run_sft`` and ``run_curate`` (``workers`` apart: the
        executor is chosen from it and ``engine:``)."""
        return {"force": self.force, "overwrite": self.overwrite, "unit_bytes": self.unit_bytes,
                "text_mode": self.text_mode, "exclude": self.exclude, "skip_misrouted": self.skip_misrouted,
                "limit": self.limit, "dry_run": self.dry_run, "progress": False if self.no_progress else None}


@dataclass(frozen=True, kw_only=True)
class CurationOptions(JobOptions):
    """What the commands that run curation presets add: the preset and its steps' data."""

    preset: str | None = option(None, "curation steps to run: gopher, c4, fineweb, refinedweb, dclm, consent, none "
                                "(join with +: consent+fineweb)", text, metavar="NAME")
    robots_snapshot: str | None = option(None, "robots.txt snapshot of the crawl for the consent preset (a directory "
                                         "of <host>.txt or a WARC)", text, metavar="PATH")


@dataclass(frozen=True, kw_only=True)
class TokenizerOptions(JobOptions):
    """What every command that writes token shards adds: the tokenizer, the shards."""

    tokenizer: str | None = option(None, "hub name, directory, tokenizer.json, .tiktoken, .model, or 'default'", text,
                                   metavar="SPEC")
    shard_tokens: int | None = option(None, "maximum tokens per shard file", positive_int, metavar="N", parse=int)


@dataclass(frozen=True, kw_only=True)
class TokenOptions(TokenizerOptions):
    """What both token tracks add: the validation split."""

    val_fraction: float | None = option(None, "send this share of the records (whole, by a seeded hash of their "
                                        "content) to DIR/val/", fraction, metavar="F", parse=float)
    val_count: int | None = option(None, "send exactly N records (those with the smallest content hashes) to DIR/val/ "
                                   "(two passes)", positive_int, metavar="N", parse=int)
    val_seed: int | None = option(None, "seed of the validation split's hash (default 0)", seed, metavar="S", parse=int)


@dataclass(frozen=True, kw_only=True)
class PretrainOptions(TokenOptions, CurationOptions):
    """``tokenmill pretrain``."""

    eos: str | None = option(None, "token appended after every document (default: the tokenizer's EOS; its document "
                             "token, e.g. <|endoftext|>, when that EOS is a chat end-of-turn token)", text, metavar="TOKEN")


@dataclass(frozen=True, kw_only=True)
class SftJobOptions(TokenOptions):
    """``tokenmill sft`` (the masking options are the ``sft:`` section: :class:`tokenmill.sft.run.SftOptions`)."""


@dataclass(frozen=True, kw_only=True)
class PrefJobOptions(TokenizerOptions):
    """``tokenmill pref`` (its own options, ``--max-length`` ...: :class:`tokenmill.pref.run.PrefOptions`); no
    validation split yet (a pair must never be split between train and validation): split the records first."""


@dataclass(frozen=True, kw_only=True)
class CurateOptions(CurationOptions):
    """``tokenmill curate`` and ``tokenmill decontaminate``."""

    quality_model: str | None = option(None, "model of the preset's quality step (dclm needs one: train it with "
                                       "`tokenmill quality train`)", text, metavar="PATH")
    score_survivors_only: bool = option(False, "later steps score only the documents earlier steps kept (faster; "
                                        "funnel --set can then only tighten exactly)", boolean, kind="switch",
                                        in_file=False)


COMMAND_OPTIONS: dict[str, type] = {"pretrain": PretrainOptions, "sft": SftJobOptions, "curate": CurateOptions,
                                     "pref": PrefJobOptions}
# keys of a pipeline file that are not options: what to read, where to write, which command, how to read it
STRUCTURE = ("track", "inputs", "out", "schema", "steps", "engine", "sft")
WHY_NOT = {  # why a command takes no such option, where a reason helps more than the field's absence
    ("sft", "preset"): "the presets are web-text pipelines for documents; list SFT steps under steps:",
    ("curate", "tokenizer"): "`tokenmill curate` writes documents, not tokens; remove it",
    ("curate", "shard_tokens"): "`tokenmill curate` writes documents, not tokens; remove it",
    ("curate", "val_fraction"): "`tokenmill curate` writes documents, not shards; split them off when tokenizing "
                                "(`tokenmill pretrain DIR/documents --val-fraction F`)",
    ("curate", "val_count"): "`tokenmill curate` writes documents, not shards; split them off when tokenizing "
                             "(`tokenmill pretrain DIR/documents --val-count N`)",
    ("sft", "eos"): "the appended end-of-document token is `tokenmill pretrain`'s; `tokenmill sft` ends turns as "
                    "the chat template says",
    ("pref", "preset"): "the presets are web-text pipelines for documents; curate before `tokenmill pref`",
    ("pref", "eos"): "the appended end-of-document token is `tokenmill pretrain`'s; `tokenmill pref` ends turns as "
                     "the chat template says (text pairs: the tokenizer's EOS, as TRL)",
    ("pref", "val_fraction"): "`tokenmill pref` writes no validation split yet; split the input records first",
    ("pref", "val_count"): "`tokenmill pref` writes no validation split yet; split the input records first",
    ("pref", "val_seed"): "`tokenmill pref` writes no validation split yet; split the input records first",
    ("curate", "eos"): "the appended end-of-document token is `tokenmill pretrain`'s; `tokenmill curate` appends none",
}


def command_problems(command: str, settings: dict[str, Any]) -> list[str]:
    """What ``tokenmill COMMAND`` cannot take among ``settings`` (a pipeline file's, checked): a key is taken
    when it is a field of the command's options class (or a key of the file's structure), and nothing else."""
    fields_of = {f.name for f in fields(COMMAND_OPTIONS[command])}
    problems = []
    for key in settings:
        if key in fields_of or (key in STRUCTURE and key != "sft") or (key == "sft" and command == "sft"):
            continue
        if key == "sft":
            problems.append(f"sft: SFT options do not apply to `tokenmill {command}`")
            continue
        others = [c for c, cls in COMMAND_OPTIONS.items() if key in {f.name for f in fields(cls)}]
        why = WHY_NOT.get((command, key)) or (f"`tokenmill {command}` takes no {key}"
                                               + (f" (an option of `tokenmill {' / '.join(others)}`)" if others else ""))
        problems.append(f"{key}: {why}")
    return problems


def file_keys() -> dict[str, Callable[[Any], Any]]:
    """Every option a pipeline file may hold, over all commands, and its check (one declaration each)."""
    rules: dict[str, Callable[[Any], Any]] = {}
    for cls in COMMAND_OPTIONS.values():
        rules.update(file_rules(cls))
    return rules


def _flag(f: Any) -> Flag:
    return f.metadata["flag"]


def add_flags(parser: argparse.ArgumentParser, cls: type, *, skip: tuple[str, ...] = (), **words: str) -> None:
    """Add one flag per field of ``cls`` to ``parser``; ``words`` fill ``{name}`` slots of the help texts.

    Flags default to None, so that a flag not given leaves the pipeline file's value (and then the
    dataclass default) in force.
    """
    for f in fields(cls):
        if f.name in skip:
            continue
        flag = _flag(f)
        text = flag.help.format(**words) if words else flag.help
        common = {"dest": f.name, "help": text, "required": flag.required or None}
        common = {k: v for k, v in common.items() if v is not None}
        kind = flag.parse or (int if f.type in ("int | None", "int") and flag.check is positive_int else str)
        if flag.kind == "switch":
            parser.add_argument(spelled(f), action="store_true", default=None, **common)
        elif flag.kind == "negate":
            parser.add_argument(spelled(f), action="store_false", default=None, **common)
        elif flag.kind == "repeat":
            parser.add_argument(spelled(f), action="append", type=kind, metavar=flag.metavar, **common)
        elif flag.kind in ("list", "extend"):
            action = "extend" if flag.kind == "extend" else "store"
            parser.add_argument(spelled(f), action=action, nargs="+", type=kind, metavar=flag.metavar, **common)
        else:
            parser.add_argument(spelled(f), type=kind, choices=getattr(flag.check, "choices", None),
                                metavar=flag.metavar, **common)


def add_options(parser: argparse.ArgumentParser, command: str, cls: type, **words: str) -> None:
    """The flags of ``tokenmill COMMAND``: one per field of its options class ``cls``, but for the job flags it
    does not take (:data:`NOT_TAKEN`), which its help names with the reason."""
    refused = NOT_TAKEN.get(command, {})
    add_flags(parser, cls, skip=tuple(refused), **words)
    if refused:
        parser.epilog = not_taken_help(command)


def file_rules(cls: type) -> dict[str, Callable[[Any], Any]]:
    """The pipeline-file keys of ``cls`` and their checks (for ``config.TOP``)."""
    return {f.name: _flag(f).check for f in fields(cls) if _flag(f).in_file}


def flag_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The values of ``cls``'s flags that were given on the command line (unchecked)."""
    return {f.name: getattr(args, f.name) for f in fields(cls) if getattr(args, f.name, None) is not None}



# ---- the job flags a command that writes does not take, and why ------------------------------------------
# `export`, `card`, `plan`, `demo` and `quality train` read no routed inputs (a shard directory, a finished run,
# a recipe, nothing, labelled texts) and run no stages to spread: of the job flags they take --dry-run (and
# --overwrite, --limit, --text-mode where the command says so). A flag of another job is refused with its
# reason, here, once: in the command's help and as its usage error, never silently ignored.
_ROUTED = "it reads no routed inputs ({what}), so no input is excluded, forced, skipped or split into work units"
_ONE_PASS = "it runs in this process, one pass with nothing to spread over workers ({why})"
_NO_FILE = "it takes no pipeline file: its options are its flags ({which})"
_INPUT_FLAGS = ("exclude", "force", "skip_misrouted", "unit_bytes")
_RECORDS = "it reads records (conversations, pairs), never plain-text lines"


def _refusals(what: str, why: str, which: str, **own: str) -> dict[str, str]:
    routed = _ROUTED.format(what=what)
    return {**dict.fromkeys(_INPUT_FLAGS, routed), "workers": _ONE_PASS.format(why=why),
            "engine": _ONE_PASS.format(why=why), "ray_address": _ONE_PASS.format(why=why),
            "config": _NO_FILE.format(which=which), **own}


NOT_TAKEN: dict[str, dict[str, str]] = {
    "export": _refusals(
        "one shard directory a tokenmill run wrote", "the shards' token files are read in order, as fast as the disk",
        "--to, --seq-len", text_mode="it reads token shards, not plain-text documents", no_progress="it prints no progress bar",
        limit="an export is every sequence of the shards: a part would pass for the whole; export the output of a "
              "`--limit` trial run instead"),
    "card": _refusals(
        "the manifest and ledger of a finished run", "the card is counted from the run's own records",
        "DIR", text_mode="it reads a finished run's records, not plain-text documents", no_progress="it prints no progress bar",
        limit="a card counts every record of the run: a part would misstate the data set",
        overwrite="the card it wrote is replaced by the next `tokenmill card`, and the run's own --overwrite removes "
                  "it; a card of the user's is never replaced"),
    "plan": _refusals(
        "a recipe, whose sources are shard directories", "the plan reads shard headers and offsets only",
        "the recipe is its pipeline file", text_mode="it reads shard headers, not plain-text documents",
        no_progress="it prints no progress bar", limit="the plan reads no records, only shard headers",
        overwrite="a rerun replaces exactly the plan it wrote there (a user's files stay): no flag needed"),
    "demo": _refusals(
        "an input it generates", "a demonstration of both tracks on one worker", "--out",
        text_mode="its generated input is read as the demo shows it", no_progress="it shows no progress bars",
        limit="its generated input is small and fixed",
        overwrite="a rerun replaces exactly what the demo wrote there (a user's files stay): no flag needed"),
    "quality train": {
        **dict.fromkeys(("force", "skip_misrouted"), "it takes records of every kind (the text column is "
                        "--text-field), so no input is routed away"),
        **dict.fromkeys(("engine", "ray_address"), "its reading is spread over --workers on this machine and its "
                        "fit is one fastText process (its threads: --param thread=N)"),
        "config": _NO_FILE.format(which="--positive, --negative, --labelled, --param")},
    **dict.fromkeys(("sft", "pref"), {"text_mode": _RECORDS}),
    "sft-select": {"text_mode": _RECORDS, "config": _NO_FILE.format(which="--n, --per-cluster, --score")},
    **{f"synth {kind}": {
        **dict.fromkeys(("workers", "engine", "ray_address"), "its units run one at a time in this process, each with "
                        "--concurrency requests in flight: the inference server does the work"),
        "config": _NO_FILE.format(which="--server, --model and the generation flags"),
        **(dict.fromkeys(("force", "skip_misrouted"), "it takes records of every kind (a prompt is a conversation or "
                         "a question), so no input is routed away") if kind == "distill" else {})}
       for kind in ("rephrase", "distill")},
    **{command: {"config": _NO_FILE.format(which=which)} for command, which in (
        ("decontaminate", "--eval, --fields, --ngram, --min-matches"), ("select", "--target, --from, --n or --fraction"),
        ("lm train", "--text, --order, --prune"))},
}


def not_taken(command: str, flag: str) -> str | None:
    """Why ``tokenmill COMMAND`` does not take ``--flag`` (None: not one of the job flags it refuses)."""
    return NOT_TAKEN.get(command, {}).get(flag.lstrip("-").replace("-", "_"))


def not_taken_help(command: str) -> str:
    """The line of the command's help that names the job flags it does not take, with the reasons."""
    by_reason: dict[str, list[str]] = {}
    for name, why in NOT_TAKEN[command].items():
        by_reason.setdefault(why, []).append("--" + name.replace("_", "-"))
    return "Job flags it does not take: " + "; ".join(f"{', '.join(flags)}: {why}" for why, flags in by_reason.items())


def add_job_flags(parser: argparse.ArgumentParser, command: str, *names: str) -> None:
    """The job flags ``names`` that ``tokenmill COMMAND`` takes (declared once, in :class:`JobOptions`), and the
    others named in its help with the reason it does not take them (:data:`NOT_TAKEN`)."""
    add_flags(parser, JobOptions, skip=tuple(f.name for f in fields(JobOptions) if f.name not in names))
    parser.epilog = not_taken_help(command)
