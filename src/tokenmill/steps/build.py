"""``steps:`` lists -> step objects, every problem reported at once: the one builder of every track.

A spec is ``{name: <registered step>, <parameter>: <value>, ...}`` or ``{step: module:Class, <parameter>: ...}``
(a user's own step, :mod:`tokenmill.steps.registry`); missing parameters take the step's defaults. What is
built must satisfy the contract (:class:`~tokenmill.steps.contract.DocStep` or
:class:`~tokenmill.steps.contract.CorpusStep`), checked here, before any work. A registered step whose module
is not part of this installation is reported as unavailable, naming it, instead of failing at import time
deep inside a worker. Each track adapts a spec before it is built through ``build`` (the SFT track's ``on:``).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from tokenmill.errors import ConfigError, TokenmillError
from tokenmill.steps.contract import CorpusStep, DocStep, Step
from tokenmill.steps.registry import STEP_CLASSES, installed_steps, known_names, load_user_target, resolve_installed, step_class


def resolve(name: Any) -> Any:
    """The class of step ``name`` (built in, or registered by an installed package); ``LookupError`` with a
    sentence when there is none."""
    if isinstance(name, str) and name not in STEP_CLASSES and name in installed_steps():
        return resolve_installed(name)
    if not isinstance(name, str) or name not in STEP_CLASSES:
        known = known_names()
        raise LookupError(f"unknown step {name!r}{_did_you_mean(name, known)}; known: {', '.join(known)} "
                          "(or your own: {step: module:Class})")
    try:
        return step_class(name)
    except ModuleNotFoundError as exc:
        module = STEP_CLASSES[name].partition(":")[0]
        if exc.name and not module.startswith(exc.name):
            raise  # the step's module exists but one of its own imports is missing
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


def build_step(spec: dict | Step, *, where: str) -> Any:
    """One step from its spec (or a step object, taken as it is); ``ConfigError`` with the spec's path.

    A :data:`~tokenmill.steps.contract.Step`, typed ``Any`` for the callers that build one step of a known
    class and read its own fields (``decontaminate``'s eval index, ``select``'s reference)."""
    if not isinstance(spec, dict) and isinstance(getattr(spec, "name", None), str) and hasattr(spec, "version"):
        return _checked(spec, type(spec).__name__, where=where, builtin=True)  # an object: the contract still holds
    spec = _mapping(spec, where)
    key = _spec_key(spec, where)
    label = spec[key]
    try:
        factory = resolve(label) if key == "name" else load_user_target(label)
    except LookupError as exc:
        raise ConfigError(f"{where}.{key}: {exc}") from None
    options = {k: v for k, v in spec.items() if k != key}
    unknown = _unknown_parameters(factory, options, str(label))
    if unknown:
        raise ConfigError([f"{where}: {u}" for u in unknown])
    try:
        step = factory(**options)
    except (TypeError, ValueError) as exc:
        message = str(exc).removeprefix(f"{label}.")  # the path already names the step
        raise ConfigError(f"{where}: {message}") from None
    except TokenmillError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return _checked(step, label, where=f"{where}.{key}", builtin=key == "name" and label in STEP_CLASSES)


def recorded_options(spec: dict) -> dict:
    """A recorded step entry's parameters that its class takes: a run records derived values beside the
    parameters (``quality``'s model file digest, computed from ``model``), which a rebuild must not pass back."""
    key = _spec_key(spec, "recorded step")
    try:
        factory = resolve(spec[key]) if key == "name" else load_user_target(spec[key])
        params = inspect.signature(factory).parameters
    except (LookupError, TypeError, ValueError):  # the rebuild itself will say what is wrong
        return dict(spec)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(spec)
    return {k: v for k, v in spec.items() if k == key or k in params}


def _mapping(spec: object, where: str) -> dict:
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: expected a mapping with a 'name' (or a 'step: module:Class' of your own)")
    return spec


def _spec_key(spec: dict, where: str) -> str:
    """``step`` (a user's ``module:Class``; a ``name:`` beside it is the step's own parameter) or ``name``."""
    if "name" not in spec and "step" not in spec:
        raise ConfigError(f"{where}: expected a mapping with a 'name' (or a 'step: module:Class' of your own)")
    return "step" if "step" in spec else "name"


def _checked(step: object, label: object, *, where: str, builtin: bool) -> Step:
    """``step`` when it satisfies the contract and, coming from outside tokenmill, takes no built-in name."""
    if not isinstance(step, (DocStep, CorpusStep)):
        raise ConfigError(f"{where}: {label} is not a step: a step has name and version, and score(batch) and "
                          "decide(scores) (a document step) or stages(upstream) (a corpus step); see docs/curation.md")
    if not builtin and step.name in STEP_CLASSES:
        raise ConfigError(f"{where}: {label} is named {step.name!r}, a built-in step's name (their ledger columns "
                          "and reasons would be mixed up); give it a name of its own")
    return step


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


def build_steps(specs: Sequence[dict | Step] | None, *, source: str = "config",
                build: Callable[..., Step] = build_step) -> list[Step]:
    """Steps from a ``steps:`` list, in order; every problem reported at once, prefixed by ``source``.
    ``build(spec, where=...)``: a track's own adapter around :func:`build_step` (the SFT track's ``on:``)."""
    steps, problems = [], []
    for i, spec in enumerate(specs or []):
        try:
            steps.append(build(spec, where=f"steps[{i}]"))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError([f"{source}: {p}" if source else p for p in problems])
    return steps
