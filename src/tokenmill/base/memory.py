"""Peak resident memory of the calling process, as the manifest reports it."""

from __future__ import annotations

import sys


def process_peak_rss_mb() -> float:
    """This process's peak resident memory in MB (``VmHWM`` on Linux, else ``ru_maxrss``)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource

    scale = 1 / 1024 if sys.platform != "darwin" else 1 / (1024 * 1024)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale, 1)
