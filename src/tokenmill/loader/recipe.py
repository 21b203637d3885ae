"""A training recipe: sources, phases and their mixtures, read from YAML into frozen dataclasses.

A recipe decides a whole run before it starts (see ``docs/recipes.md``)::

    seq_len: 2048
    total_tokens: 50_000_000
    batch: 8                     # samples per rank per step (default 8; a phase may set its own)
    world_size: 1                # ranks (default 1); global batch = batch x world_size x grad_accum
    sources:
      web: {path: out/pt}
      sft: {path: out/sft}
    phases:
      - {name: stable, share: 0.9, weights: {web: 1.0}}
      - {name: decay, share: 0.1, weights: {web: 0.7, sft: 0.3}}

Parsing checks every field and reports every problem at once (a ``ConfigError`` naming the field:
``phases[1].weights.code: unknown source``). Paths are relative to the recipe file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

from tokenmill.base.yamlsafe import load_yaml_file
from tokenmill.engine.store import is_remote
from tokenmill.errors import ConfigError, InputError

MODES = ("concat", "boundary", "bfd")


@dataclass(frozen=True)
class LongDocs:
    """Length-aware upsampling (Fu et al. 2024): documents of ``min_tokens`` or more appear ``factor`` times."""

    min_tokens: int
    factor: int


@dataclass(frozen=True)
class Source:
    name: str
    path: Path | str  # a local directory, or the URL of a finished run in object storage (s3://...)
    mode: str | None = None  # None: bfd for shards with a loss mask, concat otherwise
    cap_tokens: int | None = None  # use only the documents within the first cap_tokens tokens
    max_epochs: float | None = None  # the plan refuses to repeat the source more often
    upsample_long: LongDocs | None = None


@dataclass(frozen=True)
class Phase:
    name: str
    steps: int
    weights: tuple[tuple[str, float], ...]
    seq_len: int
    ignore_loss_mask: bool = False  # this phase trains every token, loss masks included
    batch: int | None = None  # samples per rank per step in this phase (None: the recipe's batch)

    def weight(self, source: str) -> float:
        return dict(self.weights).get(source, 0.0)


@dataclass(frozen=True)
class Recipe:
    seq_len: int
    batch: int
    world_size: int
    grad_accum: int
    seed: int
    sources: tuple[Source, ...]
    phases: tuple[Phase, ...]
    path: Path | None = None

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step over all ranks."""
        return self.batch * self.world_size * self.grad_accum

    def phase_global_batch(self, phase: Phase) -> int:
        """Samples per optimizer step of ``phase``: its own ``batch`` (else the recipe's) x ranks x accumulation."""
        return (phase.batch or self.batch) * self.world_size * self.grad_accum

    @property
    def total_steps(self) -> int:
        return sum(p.steps for p in self.phases)

    @property
    def total_samples(self) -> int:
        return sum(p.steps * self.phase_global_batch(p) for p in self.phases)

    def start_samples(self) -> list[int]:
        """The first sample of each phase (phases may differ in batch, so steps do not give it alone)."""
        out, sample = [], 0
        for p in self.phases:
            out.append(sample)
            sample += p.steps * self.phase_global_batch(p)
        return out

    def source(self, name: str) -> Source:
        return next(s for s in self.sources if s.name == name)

    def start_steps(self) -> list[int]:
        out, step = [], 0
        for p in self.phases:
            out.append(step)
            step += p.steps
        return out


TOP_KEYS = {"seq_len", "total_tokens", "batch", "world_size", "grad_accum", "seed", "sources", "phases"}
SOURCE_KEYS = {"path", "mode", "cap_tokens", "max_epochs", "upsample_long"}
PHASE_KEYS = {"name", "share", "tokens", "steps", "weights", "seq_len", "ignore_loss_mask", "batch"}

# Bounds of every number (docs/recipes.md, "Bounds"): past them a run cannot be served or planned in
# reasonable time and memory (a plan reads the packing plan of every sample: O(samples)), or a typo is
# far likelier than intent (the largest published runs draw ~4e13 tokens; a factor of 1e9 asked 4 TiB).
MAX_TOKENS = 10 ** 14
MAX_SAMPLES = 1 << 36  # steps x global batch of the whole run
MAX_EPOCHS = 1_000_000
MAX_WEIGHT = 1_000_000
WHOLE = {  # field: (low, high)
    "seq_len": (1, 1 << 20), "batch": (1, 1 << 16), "world_size": (1, 1 << 16), "grad_accum": (1, 1 << 16),
    "seed": (0, (1 << 63) - 1), "total_tokens": (1, MAX_TOKENS), "tokens": (1, MAX_TOKENS),
    "cap_tokens": (1, MAX_TOKENS), "min_tokens": (1, MAX_TOKENS), "steps": (1, MAX_SAMPLES), "factor": (1, 1000),
}


def load_recipe(path) -> Recipe:
    """Read and check a recipe file; a ``ConfigError`` lists every problem, each naming its field."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"recipe {path} does not exist")
    return parse_recipe(load_yaml_file(path, what="recipe"), base=path.parent, path=path)


def parse_recipe(doc: Any, *, base: Path = Path("."), path: Path | None = None) -> Recipe:
    """A :class:`Recipe` from the parsed YAML ``doc``; relative source paths are taken from ``base``.

    Every field is checked before anything is raised, so one ``ConfigError`` lists every problem of the
    file (a field that cannot be read only silences the checks that need its value)."""
    problems: list[str] = []
    if not isinstance(doc, Mapping):
        raise ConfigError("recipe: expected a mapping with seq_len, sources and phases")
    problems += [f"{k}: unknown field (known: {', '.join(sorted(TOP_KEYS))})" for k in doc if k not in TOP_KEYS]
    seq_len = _whole(doc, "seq_len", problems, required=True)
    batch = _whole(doc, "batch", problems, default=8)
    world = _whole(doc, "world_size", problems, default=1)
    accum = _whole(doc, "grad_accum", problems, default=1)
    seed = _whole(doc, "seed", problems, default=0)
    total = _whole(doc, "total_tokens", problems, default=None)
    sources = _sources(doc.get("sources"), base, problems)
    given = doc.get("sources")
    names = [str(k) for k in given] if isinstance(given, Mapping) else []
    run = _Run(seq_len=seq_len, total=total, total_broken=total is None and doc.get("total_tokens") is not None,
               global_batch=batch * world * accum if batch is not None and world is not None and accum is not None
               else None, batch=batch)
    phases = _phases(doc.get("phases"), names, run, problems)
    samples = (sum(p.steps * (p.batch or batch) * world * accum for p in phases)
               if batch is not None and world is not None and accum is not None else 0)
    if samples > MAX_SAMPLES:
        problems.append(f"phases: the run draws {samples:,} samples, more than {MAX_SAMPLES:,} (steps x global "
                        "batch): shorten the phases or raise seq_len")
    if problems or seq_len is None or batch is None or world is None or accum is None or seed is None:
        raise ConfigError(problems)  # a field read as None has its problem listed
    return Recipe(seq_len=seq_len, batch=batch, world_size=world, grad_accum=accum, seed=seed,
                  sources=tuple(sources), phases=tuple(phases), path=path)


@dataclass(frozen=True)
class _Run:
    """What a phase's length needs from the top of the file (``None``: not given, or given wrong)."""

    seq_len: int | None
    total: int | None
    total_broken: bool
    global_batch: int | None
    batch: int | None = None  # the recipe's samples per rank per step


def _whole(doc: Mapping, key: str, problems: list[str], *, required: bool = False, default=None, where: str = ""):
    """``doc[key]`` when it is a whole number within ``WHOLE[key]``; else None, with the problem noted."""
    low, high = WHOLE[key]
    value = doc.get(key, default)
    if value is None:
        if required:
            problems.append(f"{where}{key}: required (a whole number >= {low:,} and <= {high:,})")
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        problems.append(f"{where}{key}: expected a whole number >= {low:,} and <= {high:,}, got {_show(value)}")
        return None
    return value


def _real(value: object, low: float, high: float, *, above: bool = False) -> TypeGuard[int | float]:
    """Whether ``value`` is a finite number in ``[low, high]`` (``(low, high]`` with ``above``): NaN and
    infinities are not numbers a recipe can use."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return (low < value if above else low <= value) and value <= high


def _show(value) -> str:
    """``repr`` of a value in a message, cut short (a value may be a whole YAML subtree)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _sources(given, base: Path, problems: list[str]) -> list[Source]:
    if not isinstance(given, Mapping) or not given:
        problems.append("sources: required, a mapping of names to {path: DIR}")
        return []
    return [s for name, spec in given.items() if (s := _source(str(name), spec, base, problems)) is not None]


def _source(name: str, spec, base: Path, problems: list[str]) -> Source | None:
    where = f"sources.{name}."
    if isinstance(spec, str):
        spec = {"path": spec}
    if not isinstance(spec, Mapping) or not isinstance(spec.get("path"), str):
        problems.append(f"sources.{name}: expected {{path: DIR}} (a shard directory)")
        return None
    problems += [f"{where}{k}: unknown field (known: {', '.join(sorted(SOURCE_KEYS))})" for k in spec if k not in SOURCE_KEYS]
    mode = spec.get("mode")
    if mode is not None and mode not in MODES:
        problems.append(f"{where}mode: expected one of {', '.join(MODES)}, got {_show(mode)}")
    epochs = spec.get("max_epochs")
    if epochs is not None and not _real(epochs, 0, MAX_EPOCHS, above=True):
        problems.append(f"{where}max_epochs: expected a number > 0 and <= {MAX_EPOCHS:,} (leave it out for no cap), "
                        f"got {_show(epochs)}")
    return Source(name=name, path=_source_path(spec["path"], base), mode=mode,
                  cap_tokens=_whole(spec, "cap_tokens", problems, where=where),
                  max_epochs=epochs if _real(epochs, 0, MAX_EPOCHS, above=True) else None,
                  upsample_long=_long_docs(spec.get("upsample_long"), where, problems))


def _source_path(given: str, base: Path) -> Path | str:
    """A shard directory: a URL (``s3://...``, read as ``open_shards`` reads one) as it is; a relative local
    path from the recipe's folder."""
    if is_remote(given):
        return given
    path = Path(given).expanduser()
    return path if path.is_absolute() else base / path


def _long_docs(spec, where: str, problems: list[str]) -> LongDocs | None:
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        problems.append(f"{where}upsample_long: expected {{min_tokens: N, factor: K}}")
        return None
    inner = where + "upsample_long."
    n, k = _whole(spec, "min_tokens", problems, required=True, where=inner), _whole(spec, "factor", problems,
                                                                                    required=True, where=inner)
    return LongDocs(n, k) if n and k else None


def _phases(given, names: list[str], run: _Run, problems: list[str]) -> list[Phase]:
    if not isinstance(given, list) or not given:
        problems.append("phases: required, a list of {name, share|tokens|steps, weights}")
        return []
    out = [_phase(i, spec, names, run, problems) for i, spec in enumerate(given)]
    shares = [spec.get("share") for spec in given if isinstance(spec, Mapping)]
    given_shares = [s for s in shares if _real(s, 0, 1, above=True)]
    if len(given_shares) == len(shares) and abs(sum(given_shares) - 1) > 1e-6:
        problems.append(f"phases: the shares add up to {sum(given_shares):g}, not 1")
    seen = [p.name for p in out if p is not None]
    if len(set(seen)) < len(seen):
        problems.append(f"phases: names must be unique ({seen})")
    return [p for p in out if p is not None]


def _phase(i: int, spec, names: list[str], run: _Run, problems: list[str]) -> Phase | None:
    where = f"phases[{i}]."
    if not isinstance(spec, Mapping):
        problems.append(f"phases[{i}]: expected a mapping {{name, share|tokens|steps, weights}}")
        return None
    problems += [f"{where}{k}: unknown field (known: {', '.join(sorted(PHASE_KEYS))})" for k in spec if k not in PHASE_KEYS]
    name = spec.get("name", f"phase{i}")
    length = _whole(spec, "seq_len", problems, default=run.seq_len, where=where)
    weights = _weights(spec.get("weights"), names, where, problems)
    batch = _whole(spec, "batch", problems, where=where)
    if batch is not None and run.global_batch is not None and run.batch is not None:  # sizes this phase's steps
        run = replace(run, global_batch=run.global_batch // run.batch * batch)
    steps = _steps(spec, where, length, run, problems)
    mask = spec.get("ignore_loss_mask", False)
    if not isinstance(mask, bool):
        problems.append(f"{where}ignore_loss_mask: expected true or false, got {_show(mask)}")
    if weights is None or steps is None or length is None:
        return None
    return Phase(name=str(name), steps=steps, weights=weights, seq_len=length, ignore_loss_mask=bool(mask),
                 batch=batch)


def _weights(given, names: list[str], where: str, problems: list[str]) -> tuple[tuple[str, float], ...] | None:
    if not isinstance(given, Mapping) or not given:
        problems.append(f"{where}weights: required, a mapping of source names to numbers")
        return None
    bad = [f"{where}weights.{k}: unknown source (known: {', '.join(names)})" for k in given if str(k) not in names]
    bad += [f"{where}weights.{k}: expected a number >= 0 and <= {MAX_WEIGHT:,}, got {_show(v)}"
            for k, v in given.items() if not _real(v, 0, MAX_WEIGHT)]
    if not bad and sum(given.values()) <= 0:
        bad.append(f"{where}weights: at least one weight must be positive")
    problems += bad
    return None if bad else tuple((str(k), float(v)) for k, v in given.items())


def _steps(spec: Mapping, where: str, seq_len: int | None, run: _Run, problems: list[str]) -> int | None:
    """A phase's optimizer steps from exactly one of ``share`` (of total_tokens), ``tokens`` or ``steps``."""
    given = [k for k in ("share", "tokens", "steps") if k in spec]
    if len(given) != 1:
        problems.append(f"{where}: give exactly one of share, tokens or steps (got {given or 'none'})")
        return None
    key, value = given[0], spec[given[0]]
    if key == "steps":
        return _whole(spec, "steps", problems, where=where)
    if key == "share":
        if not _real(value, 0, 1, above=True):
            problems.append(f"{where}share: expected a number in (0, 1], got {_show(value)}")
            return None
        if run.total is None:
            if not run.total_broken:  # a total_tokens given wrong is reported on its own
                problems.append(f"{where}share: needs total_tokens at the top of the recipe")
            return None
        value = value * run.total
    elif _whole(spec, "tokens", problems, where=where) is None:
        return None
    if seq_len is None or run.global_batch is None:
        return None
    steps = round(value / (seq_len * run.global_batch))
    if steps < 1:
        problems.append(f"{where}{key}: {value:,.0f} tokens is less than one step of {seq_len * run.global_batch:,} "
                        f"tokens (seq_len {seq_len} x global batch {run.global_batch})")
        return None
    return steps
