"""Memory as the tests measure it without timing or the process's RSS: the peak of what Python and numpy
allocate (numpy reports its buffers to tracemalloc) while one call runs."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any


def traced_peak(fn: Callable[..., Any], *args: Any) -> int:
    """Bytes at the peak of the memory traced while ``fn(*args)`` runs."""
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
