"""Imported only by the multiprocessing fork server (the first of its preload modules), never by the main
process: the fork server then dies with the run that started it, and every process it forks dies with it
(see :mod:`tokenmill.engine.workers`).

The main process may already be gone when this runs (it can be killed while the server starts); the
kernel only signals deaths after the request, so the main process (its id is in the environment it
passed on) is checked once more afterwards, and watched.
"""

import os

from tokenmill.engine.workers import (
    MAIN_PID_VARIABLE,
    alive,
    die_with_parent,
    guard_forked_children,
    watch_main_process,
)

die_with_parent()
_main = int(os.environ.get(MAIN_PID_VARIABLE) or 0)
if _main and not alive(_main):
    os._exit(1)
if _main:
    watch_main_process(_main)
guard_forked_children()
