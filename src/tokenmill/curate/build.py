"""The step builder's old address: the builder lives in :mod:`tokenmill.steps.build`, presets' specs in
:mod:`tokenmill.curate.presets`.

Kept so that modules written against this path (``from tokenmill.curate.build import build_step``) still
import; new code imports from :mod:`tokenmill.steps`.
"""

from __future__ import annotations

from tokenmill.curate.presets import step_specs
from tokenmill.steps.build import build_step, build_steps, missing_steps, resolve

__all__ = ["build_step", "build_steps", "missing_steps", "resolve", "step_specs"]
