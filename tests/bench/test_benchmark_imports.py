"""Every name a benchmark script imports from tokenmill exists: the scripts are run by hand, rarely, so a name
moved or removed in the library would otherwise be found only by the next person measuring."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _imports(path: Path) -> list[tuple[str, str, int]]:
    """(module, name, line) of every ``from tokenmill... import name`` in the script, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tokenmill":
            found += [(node.module, alias.name, node.lineno) for alias in node.names]
    return found


def test_every_name_a_benchmark_imports_from_tokenmill_exists():
    missing = []
    for script in sorted(BENCHMARKS.glob("*.py")):
        for module, name, line in _imports(script):
            owner = importlib.import_module(module)
            if hasattr(owner, name):
                continue
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{script.name}:{line}: from {module} import {name}")
    assert missing == []
