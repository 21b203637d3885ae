"""The pipeline file the running command was given (``--config``), for the manifest and the data card.

The command line names a path whose contents may change after the run; the card must say what ran. The
``tokenmill`` command sets it around its subcommand (:func:`invoked`); :func:`pipeline_file` reads it, with the
file's sha256 digest, when a run starts. Library calls have none (they pass no pipeline file).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

_PIPELINE: ContextVar[str | None] = ContextVar("tokenmill_pipeline_file", default=None)


@contextlib.contextmanager
def invoked(pipeline: str | None) -> Iterator[None]:
    """Within the block, runs record ``pipeline`` (the ``--config`` file of the command) as their pipeline file."""
    token = _PIPELINE.set(pipeline)
    try:
        yield
    finally:
        _PIPELINE.reset(token)


def pipeline_file() -> dict | None:
    """``{"path": ..., "sha256": ...}`` of the running command's pipeline file (None: none, or unreadable now)."""
    path = _PIPELINE.get()
    if not path:
        return None
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None
    return {"path": str(path), "sha256": digest}
