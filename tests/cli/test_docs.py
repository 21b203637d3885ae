"""Every subcommand and every option of ``tokenmill`` is documented in README.md."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tokenmill.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    """(``"bench formats"``, parser) for every subcommand, nested ones included."""
    found = []
    for name, sub in _subparsers(parser).items():
        path = f"{prefix} {name}".strip()
        found.append((path, sub))
        found += _commands(sub, path)
    return found


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """The long option strings of a parser (``--help`` left out)."""
    return [max(a.option_strings, key=len) for a in parser._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction)]


COMMANDS = _commands(build_parser())
OPTIONS = sorted({(path, opt) for path, sub in COMMANDS for opt in _options(sub)})


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf-8")


def mentioned(option: str, text: str) -> bool:
    """``option`` as a whole word: ``--n`` is not found inside ``--no-progress``."""
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def test_the_parser_has_the_expected_commands():
    names = [path for path, _ in COMMANDS]
    for name in ("inspect", "pretrain", "sft", "export", "audit", "stats", "bench formats", "demo"):
        assert name in names


@pytest.mark.parametrize("command", [path for path, _ in COMMANDS])
def test_every_command_is_documented(readme, command):
    assert f"tokenmill {command}" in readme, f"README.md does not mention `tokenmill {command}`"


@pytest.mark.parametrize("command, option", OPTIONS)
def test_every_option_is_documented(readme, command, option):
    assert mentioned(option, readme), f"README.md does not mention {option} (of `tokenmill {command}`)"


def test_global_options_are_documented(readme):
    for option in _options(build_parser()):
        assert mentioned(option, readme), option


def test_whole_word_matching():
    assert mentioned("--n", "use --n 5") and not mentioned("--n", "use --no-progress")
    assert not mentioned("--to", "--tokenizer") and mentioned("--to", "`--to megatron`")
