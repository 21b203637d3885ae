"""Where a step's class is found: tokenmill's own steps by name, a user's by import path, an installed
package's through the ``tokenmill.steps`` entry-point group.

Three ways to name a step in a ``steps:`` list, all resolved here and all held to the same contract
(:mod:`tokenmill.steps.contract`):

* ``{name: gopher_quality, ...}``: a built-in step (:data:`STEP_CLASSES`, imported lazily: a language-ID
  model is not loaded to validate a pipeline file that does not use it);
* ``{name: my_filter, ...}``: a step an installed package registers in its ``pyproject.toml``::

      [project.entry-points."tokenmill.steps"]
      my_filter = "mypkg.filters:MyFilter"

* ``{step: mypkg.filters:MyFilter, ...}``: any importable class (or factory), by ``module:attribute``.

A package's step may not take a built-in step's name (in the entry-point group or as its ``name``): its
ledger columns and reasons would be read as the built-in step's.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from importlib import metadata
from typing import Any

GROUP = "tokenmill.steps"

# name -> "module:Class" (a string: the module is imported when the step is used)
STEP_CLASSES: dict[str, str] = {
    "length": "tokenmill.curate.filters.heuristics.length:Length",
    "gopher_quality": "tokenmill.curate.filters.heuristics.gopher:GopherQuality",
    "gopher_repetition": "tokenmill.curate.filters.heuristics.gopher:GopherRepetition",
    "c4": "tokenmill.curate.filters.heuristics.c4:C4",
    "fineweb": "tokenmill.curate.filters.heuristics.fineweb:FineWeb",
    "refinedweb": "tokenmill.curate.filters.heuristics.refinedweb:RefinedWeb",
    "language": "tokenmill.curate.filters.language:Language",
    "url": "tokenmill.curate.filters.url:UrlFilter",
    "license": "tokenmill.curate.consent.license:License",
    "robots": "tokenmill.curate.consent.robots:Robots",
    "tdm_optout": "tokenmill.curate.consent.tdm:TdmOptout",
    "tdm": "tokenmill.curate.consent.tdm:TdmOptout",  # the step's own name (its ledger columns are tdm.<stat>)
    "machine_text": "tokenmill.curate.consent.machine_text:MachineText",
    "pii": "tokenmill.curate.filters.pii:Pii",
    "exact_dedup": "tokenmill.curate.dedup.exact:ExactDedup",
    "line_dedup": "tokenmill.curate.dedup.lines:LineDedup",
    "minhash_dedup": "tokenmill.curate.dedup.minhash:MinHashDedup",
    "quality": "tokenmill.curate.quality.classifier:Quality",
    "decontaminate": "tokenmill.curate.decontam.step:Decontaminate",
    "sft_quality": "tokenmill.curate.quality.sft:SftQuality",
    "dsir": "tokenmill.curate.select.dsir:Dsir",  # importance resampling toward a reference set
    "perplexity": "tokenmill.curate.select.perplexity:Perplexity",  # CCNet's filter over an n-gram model
}


def register(name: str, target: str) -> None:
    """Add a built-in step: ``name`` -> ``"module:Class"`` (one line per step, beside its neighbours above)."""
    if name in STEP_CLASSES and STEP_CLASSES[name] != target:
        raise ValueError(f"step {name!r} is already registered as {STEP_CLASSES[name]}")
    STEP_CLASSES[name] = target


def step_class(name: str) -> Any:
    """The class registered under ``name`` (``KeyError`` for an unknown name)."""
    return import_target(STEP_CLASSES[name])


def import_target(target: str) -> Any:
    """The object ``"module:attribute"`` names (``module.attribute`` is taken as well)."""
    module, sep, attr = target.partition(":")
    if not sep:
        module, _, attr = target.rpartition(".")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@functools.cache
def installed_steps() -> dict[str, tuple[str, str]]:
    """Steps installed packages register: name -> (``"module:Class"``, the distribution that registers it).

    Read only when a name is not a built-in one (reading every installed package's entry points takes a
    fraction of a second)."""
    found = {}
    for ep in metadata.entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        found[ep.name] = (ep.value, dist.name if dist is not None else "?")
    return found


def known_names() -> list[str]:
    """Every step name a ``name:`` may use: the built-in ones, then the installed packages' ones."""
    return [*STEP_CLASSES, *(n for n in installed_steps() if n not in STEP_CLASSES)]


def resolve_installed(name: str) -> Callable[..., Any]:
    """The class an installed package registers as ``name``; ``LookupError`` with a sentence when it cannot be
    loaded, or when a package registers a built-in step's name (a built-in name always means the built-in step;
    the installed packages' steps are refused until that package renames it)."""
    installed = installed_steps()
    for clash in sorted(set(installed) & set(STEP_CLASSES)):
        raise LookupError(f"package {installed[clash][1]} registers step {clash!r} in the {GROUP} entry points, "
                          "which is a built-in step's name; rename it in that package's pyproject.toml")
    target, dist = installed[name]
    try:
        return load_user_target(target)
    except LookupError as exc:
        raise LookupError(f"step {name!r} of package {dist}: {exc}") from None


def load_user_target(target: Any) -> Callable[..., Any]:
    """A user's step class from ``"module:Class"``; ``LookupError`` with one sentence when it cannot be imported."""
    if not isinstance(target, str) or ":" not in target or not all(target.partition(":")[::2]):
        raise LookupError(f"{target!r} is not an import path; write it as module:Class (mypkg.filters:MyFilter)")
    try:
        return import_target(target)
    except ModuleNotFoundError as exc:
        raise LookupError(f"cannot import {target} (no module named {exc.name!r}); install its package or put it "
                          "on PYTHONPATH") from None
    except AttributeError:
        raise LookupError(f"module {target.partition(':')[0]} has no {target.partition(':')[2]!r}") from None
    except Exception as exc:  # the user's module raised on import: its own words, in one line
        raise LookupError(f"importing {target} failed: {type(exc).__name__}: {exc}") from None
