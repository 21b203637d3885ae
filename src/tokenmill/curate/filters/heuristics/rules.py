"""What every heuristic step shares: the first removing rule, and parameter checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def first_rule(n: int, checks: Sequence[tuple[str, Any]]) -> np.ndarray:
    """An object array of length ``n``: per document, the first rule of ``checks`` whose mask is true, or None.

    A check whose mask is ``None`` is disabled (its threshold is ``None``).
    """
    out = np.full(n, None, dtype=object)
    for rule, mask in reversed(checks):
        if mask is not None:
            out[np.asarray(mask, dtype=bool)] = rule
    return out


def check_number(step: Any, name: str, *, low: float | None = None, high: float | None = None,
                 whole: bool = False, optional: bool = True) -> None:
    """``ValueError`` naming the parameter unless it is a number in ``[low, high]`` (or None when optional)."""
    value = getattr(step, name)
    if value is None and optional:
        return
    kind = "a whole number" if whole else "a number"
    ok = isinstance(value, int if whole else (int, float)) and not isinstance(value, bool)
    if ok and isinstance(value, (int, float)) and ((low is not None and value < low) or (high is not None and value > high)):
        ok = False
    if not ok:
        bounds = f" in [{low}, {high}]" if high is not None else (f" >= {low}" if low is not None else "")
        none = " or null" if optional else ""
        raise ValueError(f"{step.name}.{name}: expected {kind}{bounds}{none}, got {value!r}")


def below(values: Any, threshold: float | None) -> np.ndarray | None:
    return None if threshold is None else np.asarray(values) < threshold


def above(values: Any, threshold: float | None) -> np.ndarray | None:
    return None if threshold is None else np.asarray(values) > threshold


def check_bool(step: Any, *names: str) -> None:
    """``TypeError`` naming the first parameter of ``names`` that is not true or false."""
    for name in names:
        if not isinstance(getattr(step, name), bool):
            raise TypeError(f"{step.name}.{name}: expected true or false, got {getattr(step, name)!r}")
