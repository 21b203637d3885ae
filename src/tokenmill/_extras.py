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


def require_installed(module: str, extra: str, purpose: str = "") -> None:
    """Raise :class:`MissingExtraError` unless ``module`` can be imported, without importing it (a check in a
    process that never uses the module, e.g. a run's main process when only its workers do)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtraError(module, extra, purpose)
