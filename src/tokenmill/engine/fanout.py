"""Sub-tasks of one unit, spread over the cluster the unit runs on.

Most grouped stages are a fixed set of units (one per hash partition) and need nothing more. A few loop
over rounds whose number depends on the data (connected components run Large-Star / Small-Star steps until
every component is a star), so they cannot be a fixed list of stages: one unit drives the loop, and each round's
per-partition work goes through :func:`fan_out`. The unit's task says so with a class attribute
``fans_out = True``.

* Local engine: the calls run one after the other, in the unit's process.
* Ray executor: the unit's loop runs in the driver and every call goes to one of the executor's actors
  (anywhere in the cluster, one CPU each, ``workers`` at a time), run again by Ray when its worker dies.
  (Driving the loop from an actor would keep that actor's CPU while it waits: a one-CPU cluster would
  deadlock, and a Ray task per call would start fresh worker processes, about 10 s each on a loaded
  2-core machine, against 0.5 s per stage with the actors already running.)

Contract of a call ``fn(item)``: it reads and writes files on the shared output directory only, writes
whole files under names derived from ``item`` (removing its own leftovers first), and returns a small
picklable value. A retried call then leaves exactly what one call leaves, and the unit's result does not
depend on where or how often its calls ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

_BACKEND: list[Callable[[Callable[[Any], Any], list], list]] = []  # set in a process running a unit on Ray


def fan_out(fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """``[fn(x) for x in items]``, the calls spread over the cluster when this unit runs on one."""
    items = list(items)
    if _BACKEND and len(items) > 1:
        return _BACKEND[0](fn, items)
    return [fn(x) for x in items]


def install(backend: Callable[[Callable[[Any], Any], list], list] | None) -> None:
    """Route :func:`fan_out` of this process through ``backend`` (``None``: back to serial calls)."""
    _BACKEND.clear()
    if backend is not None:
        _BACKEND.append(backend)

