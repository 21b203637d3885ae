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

from tokenmill.config import check, read_config
from tokenmill.errors import TokenmillError
from tokenmill.job import plan_inputs, refuse_misrouted
from tokenmill.job.options import command_problems
from tokenmill.route import inspect_file, schema_summary
from tokenmill.route.mapping import mapping_problems
from tokenmill.sft.options import SftOptions
from tokenmill.sft.template import load_template
from tokenmill.tokenize import sources
from tokenmill.tokenize.tiktoken_specs import encoding_names


def check_pipeline(path: str | Path) -> tuple[list[str], list[str]]:
    """(problems, notes) of the pipeline file at ``path``; no problems means a run can start."""
    try:
        data = read_config(path)
    except TokenmillError as exc:
        return _problems_of(exc), []
    cfg, problems = check(data, source=str(path))
    track = cfg.get("track")
    problems += [f"{path}: {p}" for p in _shape_problems(data, cfg)]
    notes = _shape_notes(data, cfg)
    if track == "sft" or cfg.get("sft"):
        problems += [f"{path}: {p}" for p in _sft_problems(cfg.get("sft") or {})]
    problems += [f"{path}: {p}" for p in _tokenizer_problems(cfg.get("tokenizer", "default"))]
    if cfg.get("inputs"):
        found, routed = _input_problems(_kind(cfg), cfg)
        problems += [f"{path}: {p}" for p in found]
        notes += routed
    return problems, notes


def _kind(cfg: dict) -> str:
    """The kind of data the file's inputs must be: its track's, else what its options imply (documents
    unless it holds SFT options)."""
    track = cfg.get("track")
    if track in ("pretrain", "sft"):
        return track
    return "sft" if track is None and cfg.get("sft") else "pretrain"


def _problems_of(exc: TokenmillError) -> list[str]:
    return list(getattr(exc, "problems", None) or [str(exc)])


def _shape_problems(data: Any, cfg: dict) -> list[str]:
    """What the file's command cannot take: the keys its options class does not declare, as ``--config`` refuses
    them (:func:`tokenmill.job.options.command_problems`). A file without ``track:``, ``inputs:`` or ``out:`` is
    fine (the command that reads it names them); see :func:`_shape_notes`."""
    if not isinstance(data, dict) or cfg.get("track") is None:
        return []
    return command_problems(cfg["track"], {k: v for k, v in cfg.items() if k != "track"})


def _shape_notes(data: Any, cfg: dict) -> list[str]:
    if not isinstance(data, dict):
        return []
    notes = []
    if "track" not in data:
        runs = "`tokenmill sft --config`" if cfg.get("sft") else "`tokenmill curate --config` or `tokenmill pretrain --config`"
        notes.append(f"track: not named; the file runs under the command that reads it ({runs})")
    notes += [f"{key}: not set; give it on the command line" for key in ("inputs", "out") if key not in data]
    return notes


def _sft_problems(sft: dict) -> list[str]:
    problems = []
    try:
        SftOptions(**sft).policy  # noqa: B018 -- validates the masking options
    except (TokenmillError, TypeError, ValueError) as exc:
        problems.append(f"sft: {exc}")
    if sft.get("chat_template"):
        try:
            load_template(sft["chat_template"])
        except (TokenmillError, OSError) as exc:
            problems.append(f"sft.chat_template: {exc}")
    return problems


def _tokenizer_problems(spec: str) -> list[str]:
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
    given = cfg.get("schema") or {}
    seen: dict[str, Any] = {}
    try:  # the run's own planner: the same walk, --exclude, routing, mapping check and misroute refusal
        planned = plan_inputs(track, cfg["inputs"], text_mode=cfg.get("text_mode", "auto"), schemas=given,
                              exclude=cfg.get("exclude") or (), force=bool(cfg.get("force")),
                              skip_misrouted=bool(cfg.get("skip_misrouted")), on_files=lambda f: seen.update(files=f))
    except TokenmillError as exc:
        if "files" not in seen:
            return [f"inputs: {p}" for p in _problems_of(exc)], []
        files = seen["files"]  # every problem at once: each mapping, then the router's verdicts
        routes = [inspect_file(f, text_mode=cfg.get("text_mode", "auto")) for f in files]
        problems = mapping_problems(track, files, routes, given)
        unmapped = [r for f, r in zip(files, routes) if f.rel not in given and "*" not in given]
        try:
            refuse_misrouted(track, unmapped, force=bool(cfg.get("force")) or bool(cfg.get("skip_misrouted")))
        except TokenmillError as refused:
            problems.append(f"inputs: {refused}")
        return problems or [f"inputs: {p}" for p in _problems_of(exc)], _route_notes(files, routes, schema_summary)
    return [], _route_notes(planned.files, planned.routes, schema_summary)


def _route_notes(files: list, routes: list, summary: Any) -> list[str]:
    return [f"{f.rel}: {r.format}, {r.kind} ({r.confidence:.2f}), {summary(r.schema)}" for f, r in zip(files, routes)]
