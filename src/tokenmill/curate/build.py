"""``steps:`` lists and presets -> step objects, every problem reported at once.

A spec is ``{name: <registered step>, <parameter>: <value>, ...}``; missing parameters take the step's
defaults (the reference values). A preset (``--preset fineweb``) is a named list of specs
(:mod:`tokenmill.curate.presets`). A registered step whose module is not part of this installation is
reported as unavailable, naming it, instead of failing at import time deep inside a worker.
"""

from __future__ import annotations

import difflib
import inspect
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
        raise LookupError(f"unknown step {name!r}{_did_you_mean(name, STEP_CLASSES)}; known: {', '.join(STEP_CLASSES)}")
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
    unknown = _unknown_parameters(factory, options, spec["name"])
    if unknown:
        raise ConfigError([f"{where}: {u}" for u in unknown])
    try:
        return factory(**options)
    except (TypeError, ValueError) as exc:
        message = str(exc).removeprefix(f"{spec['name']}.")  # the path already names the step
        raise ConfigError(f"{where}: {message}") from None
    except TokenmillError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _unknown_parameters(factory: Any, options: dict, name: str) -> list[str]:
    """One sentence per option the step does not take, with a close parameter name and the step's parameters
    (rather than Python's ``__init__() got an unexpected keyword argument``)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a factory without a readable signature: the call itself will tell
        return []
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    known = [k for k, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and k != "name"]
    return [f"unknown parameter {k!r} of step {name!r}{_did_you_mean(k, known)}; its parameters: "
            f"{', '.join(known) or 'none'}" for k in options if k not in params]


def _did_you_mean(name: Any, known: Any) -> str:
    close = difflib.get_close_matches(name, list(known), n=1) if isinstance(name, str) else []
    return f" (did you mean {close[0]!r}?)" if close else ""


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


def step_specs(preset: str | None, steps: list[dict] | None, *, quality_model: str | None = None,
               robots_snapshot: str | None = None) -> list[dict]:
    """The specs a run uses: the preset's, then the pipeline file's ``steps:`` after them.

    ``quality_model`` is the model of the preset's quality step (``--preset dclm --quality-model PATH``);
    ``robots_snapshot`` the snapshot of its robots step (``--preset consent --robots-snapshot PATH``).
    """
    from tokenmill.curate.presets import preset_specs

    if quality_model and not preset:
        raise ConfigError("--quality-model: it is the model of a preset's quality step (--preset dclm); without a "
                          "preset give it in steps: [{name: quality, model: PATH, top_fraction: F}]")
    if robots_snapshot and not preset:
        raise ConfigError("--robots-snapshot: it is the snapshot of a preset's robots step (--preset consent); "
                          "without a preset give it in steps: [{name: robots, snapshot: PATH}]")
    chosen = preset_specs(preset, quality_model=quality_model, robots_snapshot=robots_snapshot) if preset else []
    return chosen + list(steps or [])
