"""A user's own step, from a package installed outside tokenmill, runs like a built-in one.

The package is built here (``pyproject.toml`` with a ``tokenmill.steps`` entry point), installed with
``pip install --target`` into a folder of its own (its ``.dist-info`` beside it, so entry points are found) and
put on ``PYTHONPATH`` of real ``tokenmill curate`` and ``tokenmill pretrain`` processes. Its steps go through the
same contract, decision ledger and fingerprint: the package's version is in the run's identity, so a new version
of the package refuses to resume the parts the old one scored.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tokenmill
from tokenmill.errors import ConfigError
from tokenmill.report.ledger import ledger_problems, read_ledger
from tokenmill.steps.build import build_steps
from tokenmill.steps.registry import installed_steps

FILTERS = '''
"""Two steps of a user's package: one registered by entry point, one named by its import path."""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow.compute as pc

from tokenmill.steps.contract import Scored


@dataclass(frozen=True)
class NoDigits:
    """Remove documents with more than ``max_digits`` digits."""

    max_digits: int = 0
    name: str = "no_digits"
    version: int = 1
    decision_params: ClassVar[tuple] = ("max_digits",)

    def score(self, batch):
        return Scored({"digits": pc.count_substring_regex(batch.column("text"), r"[0-9]").to_numpy()})

    def decide(self, scores):
        return np.where(scores["digits"] > self.max_digits, "digits", None)


@dataclass(frozen=True)
class Mentions:
    """Remove documents that mention ``word``."""

    word: str = "river"
    name: str = "mentions"
    version: int = 1

    def score(self, batch):
        return Scored({"hit": pc.match_substring(batch.column("text"), self.word).to_numpy(zero_copy_only=False)})

    def decide(self, scores):
        return np.where(scores["hit"], "mentioned", None)


class NotAStep:
    """Has no score/decide and no stages."""

    name, version = "not_a_step", 1


@dataclass(frozen=True)
class Shadow(Mentions):
    name: str = "length"
'''

PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "mill-extras"
version = "{version}"

[project.entry-points."tokenmill.steps"]
no_digits = "mill_extras.filters:NoDigits"

[tool.setuptools]
packages = ["mill_extras"]
'''

PIPELINE = """\
steps:
  - {name: no_digits, max_digits: 1}
  - {step: "mill_extras.filters:Mentions", word: river}
"""


def install(tmp: Path, version: str) -> Path:
    """Build the package at ``version`` and ``pip install --target`` it; the folder to put on PYTHONPATH."""
    src = tmp / f"src-{version}"
    (src / "mill_extras").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT.format(version=version))
    (src / "mill_extras" / "__init__.py").write_text("")
    (src / "mill_extras" / "filters.py").write_text(textwrap.dedent(FILTERS))
    target = tmp / f"site-{version}"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-index",
                           "--no-deps", "--target", str(target), str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (target / f"mill_extras-{version}.dist-info" / "entry_points.txt").is_file()
    return target


@pytest.fixture(scope="module")
def sites(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("userpkg")
    return {"1.0.0": install(tmp, "1.0.0"), "2.0.0": install(tmp, "2.0.0")}


def tokenmill_cli(site: Path, *args: str) -> subprocess.CompletedProcess:
    """``tokenmill ARGS`` in a fresh process that sees the package installed in ``site``."""
    ours = str(Path(tokenmill.__file__).resolve().parents[1])
    path = os.pathsep.join([str(site), ours, *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "tokenmill.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": path})


WORDS = "the river flows past old stone houses while children count boats and birds under a pale sky".split()


def corpus(tmp_path: Path) -> Path:
    """72 documents: some mention the river, 12 carry a phone number (digits)."""
    rng = random.Random(2)
    src = tmp_path / "in" / "docs.jsonl"
    src.parent.mkdir()
    with open(src, "w", encoding="utf-8") as f:
        for i in range(72):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
            text += f" call 555-01{i:02d} now" if i % 6 == 0 else ""
            f.write(json.dumps({"id": f"doc-{i}", "text": text}) + "\n")
    return src


def expected(src: Path) -> dict[str, int]:
    removed = {"no_digits_v1:digits": 0, "mentions_v1:mentioned": 0}
    for line in src.read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["text"]
        if sum(c.isdigit() for c in text) > 1:
            removed["no_digits_v1:digits"] += 1
        elif "river" in text:
            removed["mentions_v1:mentioned"] += 1
    return removed


@pytest.mark.parametrize("command", ["curate", "pretrain"])
def test_a_user_step_runs_through_the_ledger_and_its_version_enters_the_fingerprint(sites, tmp_path, command):
    src = corpus(tmp_path)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    out = tmp_path / "out"
    args = [command, str(src), "--out", str(out), "--config", str(tmp_path / "pipeline.yaml"), "--workers", "2",
            "--unit-bytes", "4KB", "--no-progress"]
    done = tokenmill_cli(sites["1.0.0"], *args)
    assert done.returncode == 0, done.stderr
    m = json.loads((out / "manifest.json").read_text())
    want = expected(src)
    assert all(want.values()) and m["counts"]["filtered"] == want
    assert ledger_problems(out, m) == []
    ledger = read_ledger(out, m)
    assert {"no_digits.digits", "mentions.hit"} <= set(ledger.column_names)
    package = {"name": "mill-extras", "version": "1.0.0"}
    assert [(e["id"], e["package"], e["class"]) for e in m["steps"]] == [
        ("no_digits_v1", package, "mill_extras.filters:NoDigits"), ("mentions_v1", package, "mill_extras.filters:Mentions")]
    assert m["config"]["step_packages"] == [package]

    replay = tokenmill_cli(sites["1.0.0"], "funnel", str(out), "--set", "no_digits.max_digits=100", "--json")
    assert replay.returncode == 0, replay.stderr  # the funnel rebuilds the step from its class and replays it
    assert json.loads(replay.stdout)["kept"] == m["counts"]["kept"] + want["no_digits_v1:digits"] - sum(
        "river" in json.loads(line)["text"] for line in src.read_text().splitlines() if "555-" in line)

    again = tokenmill_cli(sites["1.0.0"], *args)  # the same package: the finished run is resumed, not redone
    assert again.returncode == 0, again.stderr
    newer = tokenmill_cli(sites["2.0.0"], *args)  # a new version: the parts the old one scored are not resumed
    assert newer.returncode != 0 and "other inputs or settings" in newer.stderr and "Traceback" not in newer.stderr
    redone = tokenmill_cli(sites["2.0.0"], *args, "--overwrite")
    assert redone.returncode == 0, redone.stderr
    m2 = json.loads((out / "manifest.json").read_text())
    assert m2["config"]["step_packages"] == [{"name": "mill-extras", "version": "2.0.0"}]
    assert m2["counts"] == m["counts"] and ledger_problems(out, m2) == []


@pytest.mark.parametrize("command", ["curate", "pretrain"])
def test_a_user_step_on_ray_decides_as_on_the_local_pool(sites, tmp_path, command):
    pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")
    src = corpus(tmp_path)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    manifests = {}
    for engine in ("local", "ray"):
        out = tmp_path / engine
        done = tokenmill_cli(sites["1.0.0"], command, str(src), "--out", str(out), "--config",
                             str(tmp_path / "pipeline.yaml"), "--engine", engine, "--workers", "2", "--unit-bytes",
                             "4KB", "--no-progress")
        assert done.returncode == 0, done.stderr
        manifests[engine] = json.loads((out / "manifest.json").read_text())
        assert ledger_problems(out, manifests[engine]) == []
    assert manifests["ray"]["counts"] == manifests["local"]["counts"] and manifests["ray"]["counts"]["filtered"]
    assert read_ledger(tmp_path / "ray", manifests["ray"]).equals(read_ledger(tmp_path / "local", manifests["local"]))


def test_a_spec_that_cannot_be_imported_is_one_line(sites, tmp_path):
    src = corpus(tmp_path)
    (tmp_path / "bad.yaml").write_text('steps:\n  - {step: "mill_extras.nosuch:Thing"}\n')
    done = tokenmill_cli(sites["1.0.0"], "curate", str(src), "--out", str(tmp_path / "out"), "--config",
                         str(tmp_path / "bad.yaml"), "--no-progress")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "steps[0].step: cannot import mill_extras.nosuch:Thing (no module named 'mill_extras.nosuch')" \
        in done.stderr


@pytest.mark.parametrize(("spec", "message"), [
    ({"step": "mill_extras.filters:NotAStep"}, "mill_extras.filters:NotAStep is not a step"),
    ({"step": "mill_extras.filters:Shadow"}, "is named 'length', a built-in step's name"),
    ({"step": "mill_extras.filters:Nothing"}, "module mill_extras.filters has no 'Nothing'"),
    ({"step": "mill_extras.filters"}, "is not an import path; write it as module:Class"),
    ({"step": "mill_extras.filters:Mentions", "wrod": "x"}, "unknown parameter 'wrod'"),
])
def test_a_user_step_that_breaks_the_contract_is_refused_naming_it(sites, monkeypatch, spec, message):
    monkeypatch.syspath_prepend(str(sites["1.0.0"]))
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        build_steps([spec], source="pipeline.yaml")


def test_a_package_that_registers_a_built_in_name_is_refused(tmp_path, monkeypatch):
    """A distribution found on the path (its ``.dist-info`` alone) registering ``length`` beside a step of its
    own: the installed steps are refused, naming it; the built-in ``length`` stays the built-in step."""
    info = tmp_path / "clash-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clash\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tokenmill.steps]\nlength = clash:Length\nclash_words = clash:Words\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    installed_steps.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"steps\[0\]\.name: package clash registers step 'length' in the "
                                              "tokenmill.steps entry points, which is a built-in step's name"):
            build_steps([{"name": "clash_words"}], source="pipeline.yaml")
        (step,) = build_steps([{"name": "length", "min_chars": 2}], source="pipeline.yaml")
        assert type(step).__module__ == "tokenmill.curate.filters.heuristics.length"
    finally:
        installed_steps.cache_clear()
