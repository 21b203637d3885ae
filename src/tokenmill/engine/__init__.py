"""Executors. What runs (a picklable task over one work unit) is separate from where it runs."""

from tokenmill.engine.local import RunState, run_units

__all__ = ["RunState", "run_units"]
