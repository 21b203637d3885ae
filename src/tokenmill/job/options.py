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


@dataclass(frozen=True)
class Flag:
    """How one option is spelled and read (see the module docstring)."""

    help: str
    check: Callable[[Any], Any]
    metavar: str | None = None
    kind: str = "value"  # "switch" (store_true), "repeat" (append), "value"
    cli: str | None = None  # the flag, when not ``--<name>``
    in_file: bool = True
    fingerprint: bool = True


def option(default: Any, help: str, check: Callable[[Any], Any], **flag: Any) -> Any:
    return field(default=default, metadata={"flag": Flag(help, check, **flag)})


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """What every command that reads inputs and writes ``--out`` takes; ``{other}`` in a help text is the
    kind of data the command refuses (``the other track``, ``the SFT track``)."""

    workers: int | None = option(None, "worker processes (default: all cores, or every CPU of the Ray cluster)",
                                 positive_int, metavar="N", fingerprint=False)
    force: bool = option(False, "process inputs the router assigns to the {other}", boolean, kind="switch")
    overwrite: bool = option(False, "start again: remove what an earlier tokenmill run wrote in --out (nothing else)",
                             boolean, kind="switch", fingerprint=False)
    unit_bytes: int | None = option(None, "work unit size, e.g. 64MiB (JSONL split by byte range, Parquet by row "
                                    "group); default: the inputs' total size / 16, between 4 MiB and 64 MiB",
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

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> JobOptions:
        """The options from checked settings (pipeline file, then flags on top), defaults for the rest."""
        given = {f.name: settings[f.name] for f in fields(cls) if settings.get(f.name) is not None}
        if "exclude" in given:
            given["exclude"] = tuple(given["exclude"])
        return cls(**given)

    def run_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``run_pretrain``, ``run_sft`` and ``run_curate`` (``workers`` apart: the
        executor is chosen from it and ``engine:``)."""
        return {"force": self.force, "overwrite": self.overwrite, "unit_bytes": self.unit_bytes,
                "text_mode": self.text_mode, "exclude": self.exclude, "skip_misrouted": self.skip_misrouted,
                "limit": self.limit, "dry_run": self.dry_run, "progress": False if self.no_progress else None}

    def fingerprinted(self) -> dict[str, Any]:
        """The options a resume must match."""
        return {f.name: getattr(self, f.name) for f in fields(self) if _flag(f).fingerprint}


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
        name = flag.cli or "--" + f.name.replace("_", "-")
        text = flag.help.format(**words) if words else flag.help
        choices = getattr(flag.check, "choices", None)
        if flag.kind == "switch":
            parser.add_argument(name, action="store_true", default=None, help=text)
        elif flag.kind == "repeat":
            parser.add_argument(name, action="append", metavar=flag.metavar, help=text)
        else:
            kind = int if f.type in ("int | None", "int") and flag.check is positive_int else None
            parser.add_argument(name, type=kind, choices=choices, metavar=flag.metavar, help=text)


def file_rules(cls: type) -> dict[str, Callable[[Any], Any]]:
    """The pipeline-file keys of ``cls`` and their checks (for ``config.TOP``)."""
    return {f.name: _flag(f).check for f in fields(cls) if _flag(f).in_file}


def flag_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The values of ``cls``'s flags that were given on the command line (unchecked)."""
    return {f.name: getattr(args, f.name) for f in fields(cls) if getattr(args, f.name, None) is not None}

