"""Every test that starts or joins a Ray cluster is in the suite's "ray" group (tests/conftest.py), so two
xdist workers never run two of them at once; the grouped fixtures are checked at collection."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

TESTS = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("tokenmill_tests_conftest", TESTS / "conftest.py")
_root = importlib.util.module_from_spec(_spec)  # the root conftest by its path: "conftest" may be another one
_spec.loader.exec_module(_root)
SERIAL_GROUPS, serial_group = _root.SERIAL_GROUPS, _root.serial_group
STARTS_RAY = ("RayExecutor(", "ray.init(", '"--engine", "ray"', "ray_cluster", '"ray", "start"', "ray_cli")


def _ray_tests() -> list[str]:
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        source = path.read_text(encoding="utf-8")
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                body = ast.get_source_segment(source, node) or ""
                if any(s in body for s in STARTS_RAY):
                    found.append(f"{path.relative_to(TESTS.parent).as_posix()}::{node.name}")
    return found


def test_every_test_that_starts_ray_is_in_the_ray_group():
    found = _ray_tests()
    assert len(found) >= 10  # the engine, curate, track and cli tests that run on a cluster
    assert [n for n in found if serial_group(n) != "ray"] == []


def test_the_groups_do_not_catch_words_that_only_contain_ray():
    assert serial_group("tests/io/test_arrays.py::test_an_array_of_strays") is None
    assert serial_group("tests/engine/test_ray_quiet.py::test_x") == "ray"
    assert serial_group("tests/curate/test_realdata_preset_golden.py::test_p[dclm]") == "realdata-quality-model"
    assert set(SERIAL_GROUPS) == {"ray", "realdata-quality-model"}
