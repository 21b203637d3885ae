"""``benchmarks/common.py``: a benchmark rewrites its own BENCHMARKS.md section and leaves the others alone."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

COMMON = Path(__file__).resolve().parents[2] / "benchmarks" / "common.py"


@pytest.fixture(scope="module")
def common():
    spec = importlib.util.spec_from_file_location("bench_common", COMMON)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_update_section_appends_then_replaces(common, tmp_path):
    md = tmp_path / "BENCHMARKS.md"
    common.update_section("Storage formats", "table one", path=md)
    common.update_section("Other", "someone else's numbers", path=md)
    common.update_section("Storage formats", "table two", path=md)
    text = md.read_text()
    assert text.startswith("# tokenmill benchmarks")
    assert "table one" not in text and "table two" in text
    assert "## Other\n\nsomeone else's numbers\n" in text
    assert text.index("## Storage formats") < text.index("## Other")
    assert text.count("## Storage formats") == 1


def test_run_measured_sees_the_child_memory(common):
    import sys

    code = "import time; x = bytearray(150 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(0.5); print('ok')"
    done = common.run_measured([sys.executable, "-c", code], poll_s=0.02)
    assert done["rc"] == 0 and done["stdout"].strip() == "ok"
    assert done["peak_rss_mb"] > 150 and done["peak_pss_mb"] > 150
    assert done["wall_s"] >= 0.5
