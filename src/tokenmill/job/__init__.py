"""The one job driver: what every command that reads inputs and writes ``--out`` does around its stages.

* :func:`plan_inputs` (``inputs.py``): resolve, walk, ``--exclude``, route, check the mappings, the
  misroute policy (refuse, ``--force`` or ``--skip-misrouted``), split into work units: a frozen
  :class:`Inputs`. Every command that reads inputs calls it.
* :func:`hold_job` (``driver.py``): the ``--out`` guard (never an input, never a folder tokenmill did not
  write, never another workflow's output unless ``--overwrite``), the exclusive lock, ``--overwrite``
  (only tokenmill's own files), ``s3://`` outputs; :func:`job_fingerprint`, :func:`stage_progress`.
* the run's one decision ledger, one row per input record: :mod:`tokenmill.report.ledger`.

A workflow (``pretrain``, ``sft``, ``curate``, ``decontaminate``, ``synth``, ``sft select``, ``demo``) is a
function that returns its stages; it runs them inside :func:`hold_job`.
"""

from tokenmill.job.driver import (
           check_file_target,
           check_job,
           hold_job,
           holding,
           job_fingerprint,
           pick_executor,
           resolve_out,
           stage_progress,
)
from tokenmill.job.inputs import Inputs, estimate_units, plan_inputs, refuse_misrouted

__all__ = ["Inputs", "check_file_target", "check_job", "estimate_units", "hold_job", "holding", "job_fingerprint",
           "pick_executor", "plan_inputs", "refuse_misrouted", "resolve_out", "stage_progress"]
