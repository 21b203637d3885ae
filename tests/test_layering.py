"""io, report and engine are leaves over the base layer: none imports another at module level.

Each package, with every one of its modules, is imported in a fresh interpreter; the tokenmill modules
loaded afterwards must not include the other two packages (imports inside functions are allowed: they
run only when called).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LEAVES = ("io", "report", "engine")

PROBE = """
import importlib, json, pkgutil, sys
pkg = importlib.import_module("tokenmill." + sys.argv[1])
for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
    importlib.import_module(info.name)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("tokenmill."))))
"""


def loaded_by(package: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, package], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("package", LEAVES)
def test_package_imports_neither_of_the_other_two(package):
    modules = loaded_by(package)
    assert f"tokenmill.{package}" in modules
    others = [m for m in modules for o in LEAVES
              if o != package and (m == f"tokenmill.{o}" or m.startswith(f"tokenmill.{o}."))]
    assert not others, f"tokenmill.{package} imports {others} at module level; move shared names to tokenmill.base"


def test_base_layer_imports_no_other_tokenmill_package():
    """Besides itself, the base layer may load ``tokenmill.errors`` only: the exception tree, which imports
    nothing, so a base module can raise the errors every command reports."""
    modules = loaded_by("base")
    assert all(m.startswith("tokenmill.base") or m == "tokenmill.errors" for m in modules), modules
