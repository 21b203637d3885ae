"""What this process's environment holds: a variable set for the duration of a block (a hint to a fork server
that starts inside it: the server inherits the environment it starts with), an installed package's version
(part of the caches' keys)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def environment_variable(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def package_version(package: str) -> str:
    """The installed version of ``package``, or ``"none"``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "none"
