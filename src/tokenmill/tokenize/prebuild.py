"""Build a run's fast encoder once, in the fork server, instead of once in every worker.

Building gigatoken's encoder costs more than a second of CPU for a 150k-token vocabulary (parse the
tokenizer.json, build the merge tables), which every pool worker used to pay before its first unit, and
the tokenizer loader a third time for the parity check: on 2 cores, most of a 44 MB run's start-up. The
fork server forks every worker and the loader, so an encoder it builds as it starts is in all of them from
their first instruction, in pages they share (copy-on-write) instead of one copy each.

The driver names the tokenizer in the environment the fork server inherits (:func:`hint`, around the
start of the pool); the server's preload module :mod:`tokenmill.tokenize._prebuild_server` builds it into
:data:`tokenmill.tokenize.backends.PREBUILT`, keyed by what decides the encoder (kind, split pattern,
bytes), and :func:`~tokenmill.tokenize.backends.fast_for` finds it there. The build is speculative: the
parity check still decides whether the run uses it, and any failure here only means each process builds
its own encoder (and reports the problem) as before. The server never encodes, so no tokenizer thread
pool exists in it when it forks.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tokenmill.engine.workers import server_only

VARIABLE = server_only("TOKENMILL_PREBUILD_TOKENIZER")
SERVER_MODULE = "tokenmill.tokenize._prebuild_server"


@contextlib.contextmanager
def hint(spec: Any) -> Iterator[None]:
    """Name ``spec`` to a fork server started inside the block (local paths and ``"default"`` only: a
    hub name is resolved by the run itself, where its errors are reported)."""
    path = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else None
    if path is None or not (path == "default" or Path(path).expanduser().exists()):
        yield
        return
    previous = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = path
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = previous


def with_server(modules: tuple[str, ...]) -> tuple[str, ...]:
    """A fork server's preload modules with this one's server module last (once)."""
    return (*(m for m in modules if m != SERVER_MODULE), SERVER_MODULE)


def build_from_environment() -> None:
    """In the fork server: build the fast encoder the driver named, if any (never raises)."""
    spec = os.environ.pop(VARIABLE, None)  # not passed on to the processes this one forks
    if not spec:
        return
    try:
        from tokenmill.tokenize.backends import PREBUILT, fast_for, source_key
        from tokenmill.tokenize.sources import resolve

        source = resolve(spec)
        PREBUILT[source_key(source)] = fast_for(source)
    except Exception:  # noqa: BLE001 -- speculative: the run builds (and reports) it where it is needed
        pass
