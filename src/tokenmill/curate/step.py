"""The step contract's old address: the contract lives in :mod:`tokenmill.steps.contract`.

Kept so that a step module written against this path (``from tokenmill.curate.step import Scored``) still
imports; new code imports from :mod:`tokenmill.steps`.
"""

from __future__ import annotations

from tokenmill.steps.contract import CorpusStep, DocStep, Scored, column, reason, step_id, step_params

__all__ = ["CorpusStep", "DocStep", "Scored", "column", "reason", "step_id", "step_params"]
