"""Executors and workflows. What runs (stages of picklable tasks over units) is separate from where it runs.

See ``docs/architecture.md``; the vocabulary is in :mod:`tokenmill.engine.stage`.
"""

from tokenmill.base.lazy import lazy_exports

# imported on first use (base/lazy.py): the command line imports `tokenmill.engine.workers` alone, first
_EXPORTS = {
    "LocalExecutor": "tokenmill.engine.local",
    **dict.fromkeys(("Stage", "StageContext", "StagePlan", "Unit", "UnitResult", "total"), "tokenmill.engine.stage"),
    **dict.fromkeys(("Executor", "StageState", "run_workflow"), "tokenmill.engine.workflow"),
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
