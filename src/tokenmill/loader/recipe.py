"""A training recipe: sources, phases and their mixtures, read from YAML into frozen dataclasses.

A recipe decides a whole run before it starts (see ``docs/recipes.md``)::

    seq_len: 2048
    total_tokens: 50_000_000
    batch: 8                     # samples per rank per step (default 8)
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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    path: Path
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

    @property
    def total_steps(self) -> int:
        return sum(p.steps for p in self.phases)

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
PHASE_KEYS = {"name", "share", "tokens", "steps", "weights", "seq_len", "ignore_loss_mask"}


def load_recipe(path) -> Recipe:
    """Read and check a recipe file; a ``ConfigError`` lists every problem, each naming its field."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputError(f"recipe {path} does not exist")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
    return parse_recipe(doc, base=path.parent, path=path)


def parse_recipe(doc: Any, *, base: Path = Path("."), path: Path | None = None) -> Recipe:
    """A :class:`Recipe` from the parsed YAML ``doc``; relative source paths are taken from ``base``."""
    problems: list[str] = []
    if not isinstance(doc, Mapping):
        raise ConfigError("recipe: expected a mapping with seq_len, sources and phases")
    problems += [f"{k}: unknown field (known: {', '.join(sorted(TOP_KEYS))})" for k in doc if k not in TOP_KEYS]
    seq_len = _whole(doc, "seq_len", problems, required=True)
    batch = _whole(doc, "batch", problems, default=8)
    world = _whole(doc, "world_size", problems, default=1)
    accum = _whole(doc, "grad_accum", problems, default=1)
    seed = _whole(doc, "seed", problems, default=0, low=0)
    total = _whole(doc, "total_tokens", problems, default=None)
    sources = _sources(doc.get("sources"), base, problems)
    if problems:  # phases need the numbers above
        raise ConfigError(problems)
    phases = _phases(doc.get("phases"), [s.name for s in sources], seq_len=seq_len, total=total,
                     global_batch=batch * world * accum, problems=problems)
    if problems:
        raise ConfigError(problems)
    return Recipe(seq_len=seq_len, batch=batch, world_size=world, grad_accum=accum, seed=seed,
                  sources=tuple(sources), phases=tuple(phases), path=path)


def _whole(doc: Mapping, key: str, problems: list[str], *, required: bool = False, default=None, low: int = 1,
           where: str = ""):
    value = doc.get(key, default)
    if value is None:
        if required:
            problems.append(f"{where}{key}: required (a whole number >= {low})")
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        problems.append(f"{where}{key}: expected a whole number >= {low}, got {value!r}")
        return None
    return value


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
        problems.append(f"{where}mode: expected one of {', '.join(MODES)}, got {mode!r}")
    epochs = spec.get("max_epochs")
    if epochs is not None and (not isinstance(epochs, (int, float)) or isinstance(epochs, bool) or epochs <= 0):
        problems.append(f"{where}max_epochs: expected a positive number, got {epochs!r}")
        epochs = None
    path = Path(spec["path"]).expanduser()
    return Source(name=name, path=path if path.is_absolute() else base / path, mode=mode,
                  cap_tokens=_whole(spec, "cap_tokens", problems, where=where), max_epochs=epochs,
                  upsample_long=_long_docs(spec.get("upsample_long"), where, problems))


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


def _phases(given, names: list[str], *, seq_len: int, total: int | None, global_batch: int,
            problems: list[str]) -> list[Phase]:
    if not isinstance(given, list) or not given:
        problems.append("phases: required, a list of {name, share|tokens|steps, weights}")
        return []
    out = [_phase(i, spec, names, seq_len=seq_len, total=total, global_batch=global_batch, problems=problems)
           for i, spec in enumerate(given)]
    shares = [spec.get("share") for spec in given if isinstance(spec, Mapping)]
    if all(isinstance(s, (int, float)) for s in shares) and abs(sum(shares) - 1) > 1e-6:
        problems.append(f"phases: the shares add up to {sum(shares):g}, not 1")
    seen = [p.name for p in out if p is not None]
    if len(set(seen)) < len(seen):
        problems.append(f"phases: names must be unique ({seen})")
    return [p for p in out if p is not None]


def _phase(i: int, spec, names: list[str], *, seq_len: int, total: int | None, global_batch: int,
           problems: list[str]) -> Phase | None:
    where = f"phases[{i}]."
    if not isinstance(spec, Mapping):
        problems.append(f"phases[{i}]: expected a mapping {{name, share|tokens|steps, weights}}")
        return None
    problems += [f"{where}{k}: unknown field (known: {', '.join(sorted(PHASE_KEYS))})" for k in spec if k not in PHASE_KEYS]
    name = spec.get("name", f"phase{i}")
    length = _whole(spec, "seq_len", problems, default=seq_len, where=where)
    weights = _weights(spec.get("weights"), names, where, problems)
    steps = _steps(spec, where, length, total=total, global_batch=global_batch, problems=problems)
    mask = spec.get("ignore_loss_mask", False)
    if not isinstance(mask, bool):
        problems.append(f"{where}ignore_loss_mask: expected true or false, got {mask!r}")
    if weights is None or steps is None or length is None:
        return None
    return Phase(name=str(name), steps=steps, weights=weights, seq_len=length, ignore_loss_mask=bool(mask))


def _weights(given, names: list[str], where: str, problems: list[str]) -> tuple[tuple[str, float], ...] | None:
    if not isinstance(given, Mapping) or not given:
        problems.append(f"{where}weights: required, a mapping of source names to numbers")
        return None
    bad = [f"{where}weights.{k}: unknown source (known: {', '.join(names)})" for k in given if k not in names]
    bad += [f"{where}weights.{k}: expected a number >= 0, got {v!r}" for k, v in given.items()
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0]
    if not bad and sum(given.values()) <= 0:
        bad.append(f"{where}weights: at least one weight must be positive")
    problems += bad
    return None if bad else tuple((str(k), float(v)) for k, v in given.items())


def _steps(spec: Mapping, where: str, seq_len: int | None, *, total: int | None, global_batch: int,
           problems: list[str]) -> int | None:
    """A phase's optimizer steps from exactly one of ``share`` (of total_tokens), ``tokens`` or ``steps``."""
    given = [k for k in ("share", "tokens", "steps") if k in spec]
    if len(given) != 1:
        problems.append(f"{where}: give exactly one of share, tokens or steps (got {given or 'none'})")
        return None
    key, value = given[0], spec[given[0]]
    if key == "steps":
        return _whole(spec, "steps", problems, where=where)
    if key == "share":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
            problems.append(f"{where}share: expected a number in (0, 1], got {value!r}")
            return None
        if total is None:
            problems.append(f"{where}share: needs total_tokens at the top of the recipe")
            return None
        value = value * total
    elif _whole(spec, "tokens", problems, where=where) is None:
        return None
    if seq_len is None:
        return None
    steps = round(value / (seq_len * global_batch))
    if steps < 1:
        problems.append(f"{where}{key}: {value:,.0f} tokens is less than one step of {seq_len * global_batch:,} "
                        f"tokens (seq_len {seq_len} x global batch {global_batch})")
        return None
    return steps
