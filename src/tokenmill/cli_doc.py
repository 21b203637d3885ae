"""``docs/cli.md``: the reference of every ``tokenmill`` command and option, rendered from the parser itself.

``python -m tokenmill.cli_doc`` prints the page; ``python -m tokenmill.cli_doc --write docs/cli.md`` rewrites it.
Everything comes from :func:`tokenmill.cli.build_parser`: a command is every choice of a subparsers action
(nested ones such as ``bench formats`` included), an option every action of its parser but ``-h``, with its
flags, metavar, choices, default and help, and the command's epilog (the job flags it does not take). The
page is rendered without reading the terminal's width, so the same parser gives the same bytes everywhere;
``tests/cli/test_docs.py`` checks the file against it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenmill.cli import build_parser

WIDTH = 100  # usage lines are wrapped here
HEADER = """\
# Command reference

Every `tokenmill` command and option, as `tokenmill COMMAND -h` prints them. This page is generated from the
parser: do not edit it by hand, run `python -m tokenmill.cli_doc --write docs/cli.md` after changing a
command (`tests/cli/test_docs.py` fails until it matches). Every command also takes `-h`/`--help`. What the
commands do, with examples: [README.md](../README.md) and the other pages of `docs/`.
"""


@dataclass(frozen=True)
class Command:
    """One command: its words after ``tokenmill`` (``"bench formats"``), its parser, help and other names."""

    path: str
    parser: argparse.ArgumentParser
    help: str
    aliases: tuple[str, ...] = ()


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str, tuple[str, ...]]]:
    """``(name, parser, help, aliases)`` of each direct subcommand, in the order they were added."""
    found = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        seen: dict[int, int] = {}
        for name, sub in action.choices.items():
            if id(sub) in seen:  # an alias of a parser already listed
                entry = found[seen[id(sub)]]
                found[seen[id(sub)]] = (*entry[:3], (*entry[3], name))
                continue
            seen[id(sub)] = len(found)
            found.append((name, sub, helps.get(name, sub.description or ""), ()))
    return found


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[Command]:
    """Every command under ``parser``, depth first (``bench``, then ``bench formats``)."""
    found = []
    for name, sub, help_, aliases in subcommands(parser):
        path = f"{prefix} {name}".strip()
        found.append(Command(path, sub, help_, aliases))
        found += commands(sub, path)
    return found


def documented_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The actions ``--help`` lists, less ``-h`` itself and the subcommand choices (they get sections)."""
    return [a for a in parser._actions if a.help != argparse.SUPPRESS
            and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest if not action.option_strings else action.dest.upper()


def _args(action: argparse.Action) -> str:
    """The value part of an argument, as argparse writes it (``FILE [FILE ...]``)."""
    m, nargs = _metavar(action), action.nargs
    if isinstance(action, argparse._SubParsersAction):
        return f"{m} ..."
    if nargs == 0:
        return ""
    if nargs is None:
        return m
    if nargs == "?":
        return f"[{m}]"
    if nargs == "*":
        return f"[{m} ...]"
    if nargs == "+":
        return f"{m} [{m} ...]"
    if nargs == argparse.REMAINDER:
        return "..."
    return " ".join([m] * int(nargs))


def invocation(action: argparse.Action) -> str:
    """``--engine {local,ray}``, ``--positive FILE [FILE ...]``, ``-v, --verbose``, ``INPUT``."""
    if not action.option_strings:
        return _args(action)
    value = _args(action)
    return ", ".join(f"{flag} {value}".rstrip() for flag in action.option_strings)


def _usage_part(action: argparse.Action) -> str:
    if not action.option_strings:
        return _args(action)
    part = f"{action.option_strings[0]} {_args(action)}".rstrip()
    return part if action.required else f"[{part}]"


def usage(command: Command) -> str:
    """The usage line of ``tokenmill <path>``: options first, then positionals, wrapped at :data:`WIDTH`."""
    actions = [a for a in command.parser._actions if a.help != argparse.SUPPRESS or not a.option_strings]
    parts = [_usage_part(a) for a in actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    parts += [_usage_part(a) for a in actions if not a.option_strings]
    return _wrap(" ".join(["tokenmill", *command.path.split()]), parts)


def _wrap(head: str, parts: list[str]) -> str:
    """``head`` and the parts, a line broken only between parts, continuation lines indented."""
    lines = [head]
    for part in parts:
        if len(lines[-1]) + 1 + len(part) > WIDTH and lines[-1].strip():
            lines.append(" " * 8 + part)
        else:
            lines[-1] += " " + part
    return "\n".join(lines)


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "default": action.default}
    return text


def meaning(action: argparse.Action) -> str:
    """The help text, and the default when it is worth saying and the help does not say it already (flags,
    unset values and empty lists have none worth saying)."""
    text, value = _help(action), action.default
    if (action.nargs == 0 or value is None or value is False or value == [] or value == argparse.SUPPRESS
            or "default" in text):
        return text
    return f"{text} (default `{value}`)".lstrip()


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def anchor(command: Command) -> str:
    """GitHub's anchor of the command's heading (``tokenmill bench formats`` -> ``tokenmill-bench-formats``)."""
    return "-".join(["tokenmill", *command.path.split()]).lower()


def render_command(command: Command) -> str:
    lines = [f"## `tokenmill {command.path}`", ""]
    if command.help:
        lines += [command.help[0].upper() + command.help[1:] + ("" if command.help.endswith(".") else "."), ""]
    if command.aliases:
        lines += ["Also: " + ", ".join(f"`tokenmill {a}`" for a in command.aliases) + ".", ""]
    lines += ["```", usage(command), "```", ""]
    actions = documented_actions(command.parser)
    if actions:
        lines += ["| argument | meaning |", "|---|---|"]
        lines += [f"| `{_cell(invocation(a))}` | {_cell(meaning(a))} |" for a in actions]
        lines.append("")
    if command.parser.epilog:  # what the command does not take, and why (job/options.py's NOT_TAKEN)
        lines += [command.parser.epilog, ""]
    subs = subcommands(command.parser)
    if subs:
        lines += ["| subcommand | what it does |", "|---|---|"]
        for name, _, help_, _ in subs:
            child = Command(f"{command.path} {name}", command.parser, help_)
            lines.append(f"| [`{name}`](#{anchor(child)}) | {_cell(help_)} |")
        lines.append("")
    return "\n".join(lines)


def render_global(parser: argparse.ArgumentParser) -> str:
    lines = ["## `tokenmill`", "", "```", "tokenmill [--version] COMMAND ...", "```", ""]
    lines += ["| argument | meaning |", "|---|---|"]
    lines += [f"| `{_cell(invocation(a))}` | {_cell(meaning(a))} |" for a in documented_actions(parser)]
    lines += [f"| `{_cell(invocation(a))}` | one of the commands below |" for a in parser._actions
              if isinstance(a, argparse._SubParsersAction)]
    return "\n".join([*lines, ""])


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole page, from ``parser`` (default: the ``tokenmill`` parser)."""
    if parser is None:
        parser = build_parser()
    cmds = commands(parser)
    index = ["| command | what it does |", "|---|---|"]
    index += [f"| [`tokenmill {c.path}`](#{anchor(c)}) | {_cell(c.help)} |" for c in cmds]
    parts = [HEADER, "\n".join(index) + "\n", render_global(parser), *(render_command(c) for c in cmds)]
    return "\n".join(parts).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tokenmill.cli_doc", description="print (or write) docs/cli.md")
    ap.add_argument("--write", metavar="PATH", help="write the page to PATH instead of printing it")
    args = ap.parse_args(argv)
    text = render()
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
