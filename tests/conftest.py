"""Shared fixtures. Tests make their own small data; the real-data tier reads ../shared/data when present."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path | None:
    env = os.environ.get("TOKENMILL_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "data")
    for c in candidates:
        if (c / "SOURCES.md").is_file():
            return c
    return None


SHARED_DATA = _shared_data()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data set beside the repository; skips the test (with the reason) when absent."""
    if SHARED_DATA is None:
        pytest.skip("real-data tier: ../shared/data not found (set TOKENMILL_SHARED_DATA to point at it)")
    return SHARED_DATA


def pytest_configure(config):
    # converted tokenizers are cached; keep the suite's cache out of the user's home, and give each xdist
    # worker its own (a test that clears or counts cache entries must not see another worker's)
    import tempfile

    if "TOKENMILL_CACHE" not in os.environ:
        os.environ["TOKENMILL_CACHE"] = _MADE["cache"] = tempfile.mkdtemp(prefix="tokenmill-cache-")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        os.environ["TOKENMILL_CACHE"] = os.path.join(os.environ["TOKENMILL_CACHE"], worker)
        os.makedirs(os.environ["TOKENMILL_CACHE"], exist_ok=True)


def pytest_unconfigure(config):
    """The session's cache goes with it (its language models and encoders are hundreds of MB): removed by the
    process that made it, once every xdist worker (each in its own folder below it) has ended."""
    import shutil

    if "cache" in _MADE:
        shutil.rmtree(_MADE.pop("cache"), ignore_errors=True)


_MADE: dict[str, str] = {}  # what pytest_configure made in this process


@pytest.fixture(autouse=True)
def _fresh_sft_verdicts():
    """Every test starts without cached SFT parity verdicts (sft/verdicts.py), so a run checks what it would
    check the first time; a test of the cache makes its second run itself."""
    import shutil

    from tokenmill.tokenize.sources import cache_dir

    shutil.rmtree(cache_dir() / "parity-sft", ignore_errors=True)


# Tests that must run on one xdist worker, one after another, by their node ids (the controller schedules by
# node id before any test module is imported, so the groups are named here, not by markers):
# - "ray": they start or join a Ray cluster; a cluster per worker would share the machine's /tmp/ray session
#   files, and a test that starts a second cluster beside a running one must know which one is there;
# - "realdata-quality-model": the session's quality model trained on the shared sets (tests/curate/conftest.py)
#   is trained once, on the worker that runs them all.
SERIAL_GROUPS = {
    "ray": re.compile(r"(?<![a-z])ray(?![a-z])|^tests/cli/test_cli_engine\.py::"),
    "realdata-quality-model": re.compile(r"^tests/curate/test_realdata_preset_golden\.py::|"
                                         r"::test_real_data_dclm_preset_with_a_model_trained_by_the_cli"),
}


def serial_group(nodeid: str) -> str | None:
    return next((name for name, pattern in SERIAL_GROUPS.items() if pattern.search(nodeid.lower())), None)


def pytest_xdist_make_scheduler(config, log):
    """``-n N`` schedules whole test modules (a module's fixtures are built once, on one worker), and each of
    :data:`SERIAL_GROUPS` as one unit of work."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return serial_group(nodeid) or nodeid.split("::", 1)[0]

    return Grouped(config, log)


GROUP_FIXTURES = {"ray_cluster": "ray", "realdata_quality_model": "realdata-quality-model"}


def pytest_collection_modifyitems(config, items):
    for item in items:  # a new test that uses a grouped fixture must be named into its group
        for fixture, group in GROUP_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()) and serial_group(item.nodeid) != group:
                raise pytest.UsageError(f"{item.nodeid} uses the {fixture} fixture: add it to SERIAL_GROUPS[{group!r}]")


def pytest_report_header(config):
    where = SHARED_DATA or "absent: real-data tests will be skipped"
    return f"tokenmill real-data tier: {where}"


@pytest.fixture(scope="session")
def ray_cluster() -> str:
    """One local Ray cluster (2 CPUs) for the whole session, its own even when another one runs on this
    machine (``address="local"``); yields its address for drivers that join it.

    Its workers import tokenmill from this checkout and the test helpers of ``tests/engine`` and
    ``tests/curate`` (tasks defined there travel by reference). Skips when ``ray`` cannot be imported.
    """
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")
    dirs = [REPO / "src", REPO / "tests" / "engine", REPO / "tests" / "curate", REPO / "tests" / "track"]
    path = os.pathsep.join([*map(str, dirs), os.environ.get("PYTHONPATH", "")])
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = path  # the raylet (and every worker it starts) inherits it
    try:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
