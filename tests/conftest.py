"""Shared fixtures. Tests make their own small data; the real-data tier reads ../shared/data when present."""

from __future__ import annotations

import os
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
    # converted tokenizers are cached; keep the suite's cache out of the user's home
    import tempfile

    os.environ.setdefault("TOKENMILL_CACHE", tempfile.mkdtemp(prefix="tokenmill-cache-"))


def pytest_report_header(config):
    where = SHARED_DATA or "absent: real-data tests will be skipped"
    return f"tokenmill real-data tier: {where}"
