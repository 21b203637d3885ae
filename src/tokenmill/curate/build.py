"""``steps:`` lists and presets -> step objects, every problem reported at once.

A spec is ``{name: <registered step>, <parameter>: <value>, ...}``; missing parameters take the step's
defaults (the reference values). A preset (``--preset fineweb``) is a named list of specs
(:mod:`tokenmill.curate.presets`). A registered step whose module is not part of this installation is
reported as unavailable, naming it, instead of failing at import time deep inside a worker.
"""

from __future__ import annotations

from typing import Any

from tokenmill.curate.registry import STEP_CLASSES, step_class
from tokenmill.errors import ConfigError, TokenmillError


def _legacy(name: str) -> Any:
    """Steps that predate the registry (``curate.callables``), used when the registered module is absent."""
    from tokenmill.curate.callables import STEPS

    return STEPS.get(name)


def resolve(name: Any) -> Any:
    """The class of step ``name``; raise ``LookupError`` with a sentence when there is none."""
    if not isinstance(name, str) or name not in STEP_CLASSES:
        raise LookupError(f"unknown step {name!r}; known: {', '.join(STEP_CLASSES)}")
    try:
        return step_class(name)
    except ModuleNotFoundError as exc:
        module = STEP_CLASSES[name].partition(":")[0]
        if exc.name and not module.startswith(exc.name):
            raise  # the step's module exists but one of its own imports is missing
        legacy = _legacy(name)
        if legacy is not None:
            return legacy
        raise LookupError(f"step {name!r} is not available in this installation (no module {module})") from None


def missing_steps(specs: list[dict]) -> list[str]:
    """Names in ``specs`` whose step cannot be imported here (for tests that skip, naming them)."""
    missing = []
    for spec in specs:
        try:
            resolve(spec.get("name"))
        except LookupError:
            missing.append(str(spec.get("name")))
    return missing


def build_step(spec: Any, *, where: str) -> Any:
    """One step from its spec (or a step object, taken as it is); ``ConfigError`` with the spec's path."""
    if not isinstance(spec, dict) and isinstance(getattr(spec, "name", None), str) and hasattr(spec, "version"):
        return spec
    if not isinstance(spec, dict) or "name" not in spec:
        raise ConfigError(f"{where}: expected a mapping with a 'name'")
    try:
        factory = resolve(spec["name"])
    except LookupError as exc:
        raise ConfigError(f"{where}.name: {exc}") from None
    options = {k: v for k, v in spec.items() if k != "name"}
    try:
        return factory(**options)
    except (TypeError, ValueError) as exc:
        message = str(exc).removeprefix(f"{spec['name']}.")  # the path already names the step
        raise ConfigError(f"{where}: {message}") from None
    except TokenmillError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def build_steps(specs: list[dict] | None, *, source: str = "config") -> list:
    """Steps from a ``steps:`` list, in order; every problem reported at once, prefixed by ``source``."""
    steps, problems = [], []
    for i, spec in enumerate(specs or []):
        try:
            steps.append(build_step(spec, where=f"steps[{i}]"))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError([f"{source}: {p}" if source else p for p in problems])
    return steps


def step_specs(preset: str | None, steps: list[dict] | None, *, quality_model: str | None = None) -> list[dict]:
    """The specs a run uses: the preset's, then the pipeline file's ``steps:`` after them.

    ``quality_model`` is the model of the preset's quality step (``--preset dclm --quality-model PATH``).
    """
    from tokenmill.curate.presets import preset_specs

    if quality_model and not preset:
        raise ConfigError("--quality-model: it is the model of a preset's quality step (--preset dclm); without a "
                          "preset give it in steps: [{name: quality, model: PATH, top_fraction: F}]")
    return (preset_specs(preset, quality_model=quality_model) if preset else []) + list(steps or [])
