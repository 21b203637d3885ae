"""Durable writes: a reader sees the old file or the whole new one, never a torn one."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling, fsynced, then renamed over ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def fsync_dir(path: Path) -> None:
    """Make the names in directory ``path`` durable (a filesystem that cannot sync a directory is let be)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_lines(path: Path, lines: Iterable[bytes]) -> None:
    """:func:`atomic_write` of ``lines`` (each written followed by a newline), streamed: never all in memory."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        for line in lines:
            fh.write(line)
            fh.write(b"\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
