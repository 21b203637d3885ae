"""What the tests that check the documentation's claims import is installed by `.[test]`, so CI runs them
instead of skipping them (the datatrove agreement of docs/curation.md, the TRL recipe of docs/loader.md)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLAIM_TESTS = ["tests/curate/test_datatrove_agreement.py", "tests/loader/test_loader_docs.py",
               "tests/select/test_dsir_agreement.py"]
# import name -> package name where they differ
DISTRIBUTION = {"fasttext": "fasttext-community", "yaml": "pyyaml", "data_selection": "data-selection"}


def _extra(extras: dict[str, list[str]], name: str) -> set[str]:
    names: set[str] = set()
    for req in extras[name]:
        dist = re.split(r"[<>=\[; ]", req, maxsplit=1)[0].lower()
        inner = re.match(r"tokenmill\[(.+)]", req)
        if inner:
            for sub in inner.group(1).split(","):
                names |= _extra(extras, sub.strip())
        else:
            names.add(dist)
    return names


def test_the_test_extra_installs_what_the_documentation_tests_import():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = _extra(project["optional-dependencies"], "test") | {d.split(">")[0].lower() for d in project["dependencies"]}
    needed = set()
    for rel in CLAIM_TESTS:
        for module in re.findall(r"importorskip\(\s*\"([\w.]+)\"", (ROOT / rel).read_text()):
            needed.add(DISTRIBUTION.get(module.split(".")[0], module.split(".")[0]))
    assert {"spacy", "trl", "datatrove"} <= needed
    assert not needed - installed, f"add to the test extra: {sorted(needed - installed)}"


def test_the_tools_ci_runs_are_in_the_test_extra():
    """`.ci/run` installs `.[test]` on a fresh machine, then calls its tools from the venv: each must come with it
    (basedpyright's wheel carries pyright and node, so the type check needs nothing beyond PyPI)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = _extra(project["optional-dependencies"], "test")
    tools = set(re.findall(r"^\.venv/bin/(\w+)", (ROOT / ".ci" / "run").read_text(), flags=re.M)) - {"pip", "python"}
    assert {"ruff", "basedpyright"} <= tools
    assert not tools - installed, f"add to the test extra: {sorted(tools - installed)}"
