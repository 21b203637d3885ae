"""A package's names imported on first use (PEP 562), so that importing one light submodule of it does not
import all of its siblings.

The command line reads ``tokenmill.job.options``, ``tokenmill.job.early``, ``tokenmill.engine.workers`` and
``tokenmill.engine.warm`` before anything else, to start a run's fork server while the driver imports the
track (``job/early.py``), and the fork server imports ``tokenmill.tokenize.backends`` alone to build the
encoder; with eager package ``__init__`` modules those pulled in the job driver, the executors and the
tokenizer adapter first (about 0.1 s on 2 cores, all of it before the fork server could start).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: a name of ``exports`` (name -> defining module) is imported from its
    module on first use and kept in the package; any other name is tried as a submodule."""

    def __getattr__(name: str) -> Any:
        namespace = sys.modules[package].__dict__
        module = exports.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
        elif not name.startswith("__"):
            try:
                value = importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    return __getattr__
