"""The hostile tier: inputs and situations meant to break a run. Every test runs under a memory limit.

The address-space limit (``RLIMIT_AS``) is lowered for the duration of each test to what the process
already maps plus ``HOSTILE_HEADROOM``, and restored after; processes the test starts (the CLI, its
workers) inherit it. A regression that makes memory grow without bound fails its test with a
``MemoryError`` instead of taking the machine down. A watchdog (``faulthandler``) ends the test
process, with every thread's traceback, when one test runs past ``HOSTILE_TIMEOUT`` seconds: a
regression that hangs fails the tier instead of blocking it forever.
"""

from __future__ import annotations

import faulthandler
import resource

import pytest

HOSTILE_HEADROOM = 3 << 30
HOSTILE_TIMEOUT = 240


def _mapped_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.fixture(autouse=True)
def memory_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _mapped_bytes() + HOSTILE_HEADROOM
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    faulthandler.dump_traceback_later(HOSTILE_TIMEOUT, exit=True)
    try:
        yield limit
    finally:
        faulthandler.cancel_dump_traceback_later()
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
