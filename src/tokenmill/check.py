"""``tokenmill validate PIPELINE``: every problem of a pipeline file, found at once, before any run.

Checks, in one pass: the file's keys and values (as ``--config`` does), the track's own options, the
tokenizer spec (local paths and names; a hub name is noted, not fetched), the inputs (they exist and are
readable), the router's verdict on each input (inputs of the other track are problems unless mapped or
``force``), and every explicit schema mapping against the fields the router saw in each input's sample.
Nothing is tokenized and nothing is written; the cost is the router's sample of each input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenmill.errors import TokenmillError


def check_pipeline(path: str | Path) -> tuple[list[str], list[str]]:
    """(problems, notes) of the pipeline file at ``path``; no problems means a run can start."""
    from tokenmill.config import check, read_config

    try:
        data = read_config(path)
    except TokenmillError as exc:
        return _problems_of(exc), []
    cfg, problems = check(data, source=str(path))
    track = cfg.get("track")
    problems += [f"{path}: {p}" for p in _shape_problems(data, cfg)]
    if track == "sft":
        problems += [f"{path}: {p}" for p in _sft_problems(cfg.get("sft") or {})]
    problems += [f"{path}: {p}" for p in _tokenizer_problems(cfg.get("tokenizer", "default"))]
    notes: list[str] = []
    if track and cfg.get("inputs"):
        found, notes = _input_problems(track, cfg)
        problems += [f"{path}: {p}" for p in found]
    return problems, notes


def _problems_of(exc: TokenmillError) -> list[str]:
    return list(getattr(exc, "problems", None) or [str(exc)])


def _shape_problems(data: Any, cfg: dict) -> list[str]:
    if not isinstance(data, dict):
        return []
    problems = [f"{key}: missing; a pipeline file to validate names it" for key in ("track", "inputs", "out")
                if key not in data]
    if cfg.get("track") == "sft" and cfg.get("steps"):
        problems.append("steps: curation steps belong to the pretraining track; remove them for track: sft")
    if cfg.get("track") == "pretrain" and cfg.get("sft"):
        problems.append("sft: SFT options do not apply to track: pretrain")
    return problems


def _sft_problems(sft: dict) -> list[str]:
    from tokenmill.sft.run import SftOptions
    from tokenmill.sft.template import load_template

    problems = []
    options = {k: v for k, v in sft.items() if k not in ("chat_template", "seq_len")}
    try:
        SftOptions(**options).policy  # noqa: B018 -- validates the masking options
    except (TokenmillError, TypeError, ValueError) as exc:
        problems.append(f"sft: {exc}")
    if sft.get("chat_template"):
        try:
            load_template(sft["chat_template"])
        except (TokenmillError, OSError) as exc:
            problems.append(f"sft.chat_template: {exc}")
    return problems


def _tokenizer_problems(spec: str) -> list[str]:
    from tokenmill.tokenize import sources
    from tokenmill.tokenize.tiktoken_specs import encoding_names

    local = spec == "default" or Path(spec).expanduser().exists() or sources.looks_local(spec)
    if not local and spec not in encoding_names():
        return []  # a hub name: fetched when the run starts, not here
    try:
        sources.resolve(spec)
    except TokenmillError as exc:
        return [f"tokenizer: {exc}"]
    return []


def _input_problems(track: str, cfg: dict) -> tuple[list[str], list[str]]:
    """Problems of the inputs, their routes and the mappings; one note per input (its route)."""
    from tokenmill.io import expand_inputs
    from tokenmill.route import inspect_file, schema_summary
    from tokenmill.route.mapping import mapping_problems
    from tokenmill.track import refuse_misrouted

    text_mode = cfg.get("text_mode", "auto")
    try:
        files = expand_inputs(cfg["inputs"], text_mode=text_mode)
    except TokenmillError as exc:
        return [f"inputs: {p}" for p in _problems_of(exc)], []
    routes = [inspect_file(f, text_mode=text_mode) for f in files]
    given = cfg.get("schema") or {}
    kind = "pretrain" if track == "curate" else track  # curate reads documents, as `tokenmill curate` does
    problems = mapping_problems(kind, files, routes, given)
    unmapped = [r for f, r in zip(files, routes) if f.rel not in given and "*" not in given]
    try:
        refuse_misrouted(kind, unmapped, force=bool(cfg.get("force")))
    except TokenmillError as exc:
        problems.append(f"inputs: {exc}")
    notes = [f"{f.rel}: {r.format}, {r.kind} ({r.confidence:.2f}), {schema_summary(r.schema)}"
             for f, r in zip(files, routes)]
    return problems, notes
