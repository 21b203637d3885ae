"""The step registry's old address: the registry lives in :mod:`tokenmill.steps.registry`.

Kept so that a step module written against this path still registers with one line
(``register("my_step", "tokenmill.curate.my_step:MyStep")``, or a line in ``STEP_CLASSES``, the same dict).
"""

from __future__ import annotations

from tokenmill.steps.registry import STEP_CLASSES, register

__all__ = ["STEP_CLASSES", "register"]
