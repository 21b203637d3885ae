"""The command reference ``docs/cli.md`` is what the parser renders now, holds every option ``--help`` prints, and
README.md names every command.

After adding or changing a command or an option, regenerate the page (the failure says how):
``PYTHONPATH=src python -m tokenmill.cli_doc --write docs/cli.md``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tokenmill import cli_doc
from tokenmill.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CLI_MD = ROOT / "docs" / "cli.md"
REGENERATE = "PYTHONPATH=src python -m tokenmill.cli_doc --write docs/cli.md"

COMMANDS = cli_doc.commands(build_parser())
INVOCATION = re.compile(r"^  (\S.*?)(?: {2,}|$)")  # argparse indents an argument's invocation by two spaces


@pytest.fixture(scope="module")
def reference() -> str:
    return CLI_MD.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def sections(reference) -> dict[str, str]:
    """``"bench formats"`` -> the argument rows of its section in docs/cli.md (``""`` for the global one)."""
    parts = re.split(r"^## `tokenmill ?(.*?)`$", reference, flags=re.M)
    return {name: "\n".join(line for line in body.splitlines() if line.startswith("| `"))
            for name, body in zip(parts[1::2], parts[2::2])}


def help_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string ``--help`` prints for ``parser``, read from its real output (``-h, --help`` left out)."""
    found = []
    for line in parser.format_help().splitlines():
        match = INVOCATION.match(line)
        if match and match.group(1).startswith("-"):
            found += [flag.split()[0] for flag in match.group(1).split(", ")]
    return [flag for flag in found if flag not in ("-h", "--help")]


def mentioned(option: str, text: str) -> bool:
    """``option`` as a whole word: ``--n`` is not found inside ``--no-progress``."""
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def test_the_reference_is_up_to_date(reference):
    assert reference == cli_doc.render(), (
        f"docs/cli.md is not what the parser renders now (a command or option changed): run `{REGENERATE}`")


def test_the_parser_has_the_expected_commands():
    names = [c.path for c in COMMANDS]
    for name in ("inspect", "pretrain", "sft", "curate", "export", "audit", "stats", "bench formats", "demo",
                 "quality train", "synth rephrase", "synth distill", "sft-select", "decontaminate"):
        assert name in names, name


def test_every_command_has_its_section(sections):
    assert "" in sections
    for command in COMMANDS:
        assert command.path in sections, f"docs/cli.md has no section for `tokenmill {command.path}`: run `{REGENERATE}`"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.path)
def test_every_option_help_prints_is_in_its_section(sections, command):
    options = help_options(command.parser)
    text = sections.get(command.path, "")
    missing = [opt for opt in options if not mentioned(opt, text)]
    assert not missing, f"docs/cli.md lacks {missing} of `tokenmill {command.path}`: run `{REGENERATE}`"


def test_global_options_are_in_the_reference(sections):
    options = help_options(build_parser())
    assert "--version" in options
    assert all(mentioned(opt, sections[""]) for opt in options)


def test_help_is_parsed_from_the_real_output():
    """The reader of ``--help`` finds options of every shape, and only the invocations (not option names in help texts)."""
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("-v", "--verbose", action="store_true", help="mentions --not-an-option in its text")
    p.add_argument("--positive", nargs="+", metavar="FILE", help="a " * 60)  # help wrapped over several lines
    p.add_argument("--a-very-long-option-name-indeed", metavar="VALUE_THAT_IS_LONG", help="its help on the next line")
    p.add_argument("--hidden", help=argparse.SUPPRESS)
    assert help_options(p) == ["-v", "--verbose", "--positive", "--a-very-long-option-name-indeed"]


def test_the_generator_documents_a_new_option():
    """What the regeneration is for: a flag added to a parser appears in the page, under its command."""
    parser = build_parser()
    sub = next(c.parser for c in cli_doc.commands(parser) if c.path == "bench formats")
    sub.add_argument("--frobnicate", choices=["a", "b"], default="a", help="a new option")
    text = cli_doc.render(parser)
    assert "| `--frobnicate {a,b}` | a new option (default `a`) |" in text
    assert "--frobnicate" not in cli_doc.render()


def test_the_generator_writes_the_file(tmp_path, capsys):
    target = tmp_path / "cli.md"
    assert cli_doc.main(["--write", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == cli_doc.render()
    assert cli_doc.main([]) == 0
    assert capsys.readouterr().out == cli_doc.render()


def test_usage_lines_are_broken_between_arguments_only():
    for command in COMMANDS:
        for line in cli_doc.usage(command).splitlines():
            assert len(line) <= cli_doc.WIDTH or " " not in line.strip(), line
            assert line.count("[") == line.count("]"), line


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", [c.path for c in COMMANDS])
def test_every_command_is_in_the_readme(readme, command):
    assert f"tokenmill {command}" in readme, f"README.md does not mention `tokenmill {command}`"


def test_the_readme_links_the_reference(readme):
    assert "docs/cli.md" in readme


def test_whole_word_matching():
    assert mentioned("--n", "use --n 5") and not mentioned("--n", "use --no-progress")
    assert not mentioned("--to", "--tokenizer") and mentioned("--to", "`--to megatron`")
