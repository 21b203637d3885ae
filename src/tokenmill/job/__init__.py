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

from tokenmill.base.lazy import lazy_exports

# the driver's names, imported on first use (base/lazy.py): `tokenmill.job.options` and `tokenmill.job.early`,
# which the command line reads first, need neither module
_EXPORTS = {
    **dict.fromkeys(("check_file_target", "check_job", "hold_job", "holding", "job_fingerprint", "pick_executor",
                     "resolve_out", "stage_progress"), "tokenmill.job.driver"),
    **dict.fromkeys(("Inputs", "estimate_units", "plan_inputs", "refuse_misrouted"), "tokenmill.job.inputs"),
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
