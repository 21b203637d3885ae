"""The import graph of ``tokenmill``, every import included (module level and inside functions), read
from the source: no module imports itself back through others, no package does, and at most three
package arrows run up the layers below. Only imports guarded by ``TYPE_CHECKING`` are left out, and the
root ``tokenmill/__init__.py`` (the public names, gathered from every package, and ``__version__``).

Layers, bottom first: a package may import any package of its own layer or below.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "tokenmill"
LAYERS = [
    {"errors", "_extras", "_guard", "_arrow", "base", "records"},  # vocabulary
    {"io", "tokenize", "pack"},  # reading, tokenizers, packing over lengths
    {"engine", "report", "shards"},  # stages and executors, manifests and ledgers, the shard format
    {"route", "split", "loader"},  # the router, the validation split, the loader over shards
    {"selection", "job", "track", "steps"},  # the input planner and job driver, the tracks' shared stage, steps
    {"curate", "sft", "pref", "lm"},  # step implementations and workflows, the SFT and preference tracks, n-gram LMs
    {"pretrain", "synth", "config"},  # the pretraining track, synthetic data, the pipeline file's schema
    {"check", "bench", "demo", "cli", "cli_doc"},  # the edges: validate, benchmarks, the demo and the command
]
MAX_UPWARD = 3


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py") if p != ROOT / "__init__.py"}


def _package(module: str) -> str:
    return module.split(".")[1] if "." in module else "__init__"


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path, module: str) -> set[str]:
    """Every tokenmill module ``module`` imports (relative imports resolved), TYPE_CHECKING blocks left out."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if _type_checking(node):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tokenmill"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.startswith("tokenmill"):  # `from tokenmill.route import schema`: the module, not the package
                names = [f"{base}.{a.name}" for a in node.names]
                found.update(n for n in names if n in MODULES)
                if any(n not in MODULES for n in names):
                    found.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _graph() -> dict[str, set[str]]:
    return {name: {m for m in _imports(path, name) if m in MODULES and m != name} for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def _packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    pkgs: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        pkgs[_package(module)].update(_package(t) for t in targets if _package(t) != _package(module))
    return pkgs


def _layer(package: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if package in layer)


def test_every_package_has_a_layer():
    missing = sorted(p for p in _packages(_graph()) if not any(p in layer for layer in LAYERS))
    assert not missing, f"add these packages to LAYERS: {missing}"


def test_no_module_imports_itself_back():
    assert _cycles(_graph()) == []


def test_no_package_imports_itself_back():
    assert _cycles(_packages(_graph())) == []


def test_at_most_three_arrows_run_up_the_layers():
    graph = _graph()
    upward = sorted({(_package(m), _package(t)) for m, ts in graph.items() for t in ts
                     if _layer(_package(t)) > _layer(_package(m))})
    where = {arrow: sorted(m for m, ts in graph.items() for t in ts if (_package(m), _package(t)) == arrow)
             for arrow in upward}
    assert len(upward) <= MAX_UPWARD, where


# imports of tokenmill's own modules inside functions: each hides an edge of the graph above from the reader of the
# module's top. Those left are the light paths' (the command line before a track's fork server, the fork server's
# preload) and optional extras, each with its reason beside it
MAX_IN_FUNCTIONS = 30


def _imports_in_functions() -> list[str]:
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for stmt in ast.walk(fn):
                own = (isinstance(stmt, ast.ImportFrom) and (stmt.level or (stmt.module or "").startswith("tokenmill"))
                       or isinstance(stmt, ast.Import) and any(a.name.startswith("tokenmill") for a in stmt.names))
                if own:
                    found.append(f"{module}:{stmt.lineno}")
    return sorted(set(found))  # an import in a nested function is walked from each function around it: once here


def test_few_imports_inside_functions():
    found = _imports_in_functions()
    assert len(found) <= MAX_IN_FUNCTIONS, found
