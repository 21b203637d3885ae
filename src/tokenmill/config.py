"""The YAML pipeline file: parsed and validated up front, every problem reported at once with its path.

Example::

    track: pretrain            # or sft
    inputs: [data/web/, data/books.txt]
    out: shards/web
    tokenizer: default         # hub name, directory, tokenizer.json, .tiktoken, .model, or "default"
    eos: "<|endoftext|>"       # pretrain: the token after every document (default: the tokenizer's EOS)
    workers: 2
    engine:                    # where the units run (the --engine and --ray-address flags override it)
      name: ray                # local (a process pool, default) | ray (needs tokenmill[ray])
      address: auto            # ray: join this cluster (auto = the one `ray start` runs here); none: a local one
    unit_bytes: 64MiB
    shard_tokens: 268435456
    text_mode: auto            # auto | file | line | paragraph (plain-text inputs)
    preset: fineweb            # curation steps of a published pipeline (tokenmill curate / pretrain)
    quality_model: quality.bin # the model of the preset's quality step (dclm), from `tokenmill quality train`
    robots_snapshot: robots/   # the consent preset's robots.txt snapshot (directory of <host>.txt, or a WARC)
    exclude: ["*.warc.gz"]     # inputs left out (globs over the relative or full path)
    skip_misrouted: false      # leave out inputs of the other kind (named in the manifest) instead of refusing
    limit: 1000                # only the first N records of every input (a trial run)
    val_fraction: 0.01         # whole records to out/val/ by a seeded content hash (or val_count: N, exact)
    val_seed: 0
    steps:                     # curation steps, in order, after the preset's (SFT: over each conversation)
      - {name: length, min_chars: 200, max_chars: 1000000}
    schema:                    # optional explicit field mappings, by input path (or "*")
      "*": {record: Document, text: body, id: doc_id}
    sft:                       # SFT track options
      chat_template: null      # file or tokenizer dir; null = the tokenizer's own, else built-in ChatML
      max_length: 4096
      train_on: assistant      # assistant | last | all
      train_reasoning: true
      supervise_empty_think: false
      reasoning_policy: inline # inline | drop | reject
      verify: 64               # examples per unit checked against transformers' apply_chat_template, plus the
                               # first of each conversation shape (0 = off)
      on_mismatch: stop        # stop | reject (as parity_mismatch) on a real difference from apply_chat_template
      allow_untrained_stop: false  # go on when the template's end-of-turn string is not a special token
      date: "2025-01-01"       # the day a template that stamps the time (strftime_now) renders at
      keep_unrendered_tools: false # keep records whose tools the template does not render (else rejected)
      on_unsafe: stop          # stop | reject: an example that trains nothing, a trained turn without an end
                               # mark, a truncation that removed all supervision, ids that do not decode to the
                               # render (sft/failclosed.py)

CLI flags override the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenmill.base.yamlsafe import load_yaml_file
from tokenmill.errors import ConfigError
from tokenmill.job.options import choice, file_keys, file_rules, paths
from tokenmill.sft.corpus import build_sft_steps
from tokenmill.sft.options import SftOptions
from tokenmill.steps.build import build_steps


def _typed(kind: type, *, positive: bool = False, nullable: bool = False) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v is None and nullable:
            return v
        if v is None or not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise ValueError(f"expected {kind.__name__}, got {type(v).__name__} {v!r}")
        if positive and v <= 0:
            raise ValueError(f"expected a positive number, got {v!r}")
        return v

    return check


# the file's keys: its structure, then every command's options, each declared once in its options class
# (tokenmill.job.options: which command takes which key is which class has the field)
TOP: dict[str, Callable[[Any], Any]] = {
    "track": choice("pretrain", "sft", "curate", "pref"),
    "inputs": paths,
    "out": _typed(str),
    **file_keys(),
    "schema": _typed(dict),
    "steps": _typed(list),
    "sft": _typed(dict),
    "engine": _typed(dict),
}
ENGINE: dict[str, Callable[[Any], Any]] = {
    "name": choice("local", "ray"),
    "address": _typed(str),
    "workers": _typed(int, positive=True),
}
SFT = file_rules(SftOptions)  # the sft: section: the fields of tokenmill sft's own options class


def _check_section(data: dict, rules: dict, prefix: str, problems: list[str]) -> dict:
    clean: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{prefix}{key}"
        if key not in rules:
            near = [k for k in rules if k[:3] == str(key)[:3]]
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append(f"{where}: unknown key{hint}; known keys: {', '.join(rules)}")
            continue
        try:
            clean[key] = rules[key](value)
        except (ValueError, TypeError) as exc:
            problems.append(f"{where}: {exc}")
    return clean


def validate(data: Any, *, source: str = "config") -> dict:
    """Validate a parsed pipeline document; raise ``ConfigError`` listing every problem."""
    clean, problems = check(data, source=source)
    if problems:
        raise ConfigError(problems)
    return clean


def check(data: Any, *, source: str = "config") -> tuple[dict, list[str]]:
    """The valid settings of a parsed pipeline document, and every problem found (prefixed by ``source``)."""
    if not isinstance(data, dict):
        return {}, [f"{source}: expected a mapping at the top level, got {type(data).__name__}"]
    problems: list[str] = []
    clean = _check_section(data, TOP, "", problems)
    if isinstance(clean.get("sft"), dict):
        clean["sft"] = _check_section(clean["sft"], SFT, "sft.", problems)
    if isinstance(clean.get("engine"), dict):
        clean["engine"] = _check_section(clean["engine"], ENGINE, "engine.", problems)
        problems.extend(_engine_problems(clean))
    problems.extend(_step_problems(clean.get("steps") or [], track=clean.get("track")))
    if clean.get("val_fraction") is not None and clean.get("val_count") is not None:
        problems.append("val_fraction, val_count: give one of them, not both")
    return clean, [f"{source}: {p}" for p in problems]


def _engine_problems(clean: dict) -> list[str]:
    engine = clean["engine"]
    problems = []
    if engine.get("address") and engine.get("name", "local") != "ray":
        problems.append("engine.address: a cluster address needs engine.name: ray")
    if "workers" in engine and "workers" in clean:
        problems.append("engine.workers: workers is also set at the top level; keep one of the two")
    return problems


def _step_problems(steps: list, *, track: str | None = None) -> list[str]:
    """Every problem of the ``steps:`` list (shape, names, options), in the same pass as the rest. A file
    for the SFT track, or for no track in particular, may give steps an ``on:`` (sft/corpus.py)."""
    build = build_sft_steps if track in (None, "sft") else build_steps
    try:
        build(steps, source="")
    except ConfigError as exc:
        return [p.removeprefix(": ") for p in exc.problems]
    return []


def load_config(path: str | Path) -> dict:
    return validate(read_config(path), source=str(path))


def read_config(path: str | Path) -> Any:
    """The parsed YAML document of a pipeline file (not yet validated); ``ConfigError`` when unreadable."""
    data = load_yaml_file(path, what="pipeline file")  # duplicate keys, alias bombs, non-UTF-8 refused
    return data or {}
