"""Lazy imports of optional dependencies, failing early with the install command."""

from __future__ import annotations

import importlib
from types import ModuleType

from tokenmill.errors import MissingExtraError


def require(module: str, extra: str, purpose: str = "") -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``tokenmill[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module, extra, purpose) from exc
