"""Executors and workflows. What runs (stages of picklable tasks over units) is separate from where it runs.

See ``docs/architecture.md``; the vocabulary is in :mod:`tokenmill.engine.stage`.
"""

from tokenmill.engine.local import LocalExecutor
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult, total
from tokenmill.engine.workflow import Executor, StageState, run_workflow

__all__ = [
    "Executor", "LocalExecutor", "Stage", "StageContext", "StagePlan", "StageState", "Unit", "UnitResult",
    "run_workflow", "total",
]
