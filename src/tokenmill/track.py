"""What both tracks do around their per-unit task: route and refuse, plan units, run, account, report."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from tokenmill.engine import run_units
from tokenmill.errors import RoutingError
from tokenmill.io import expand_inputs, plan_units
from tokenmill.io.base import InputFile, WorkUnit
from tokenmill.report.manifest import build_manifest, write_manifest
from tokenmill.report.rejects import merge_rejects

@dataclass
class TrackRun:
    track: str
    out: Path
    tokenizer: Any
    files: list[InputFile]
    routes: list[Any]
    schemas: dict[str, dict]
    units: list[WorkUnit]
    config: dict
    started: float


def refuse_misrouted(track: str, routes: list[Any], *, force: bool) -> None:
    """Raise ``RoutingError`` for inputs of the other kind (unless forced), naming each and why."""
    wrong = [r for r in routes if r.kind != track]
    if not wrong:
        return
    if force and all(r.kind != "preference" for r in wrong):
        return
    lines = []
    for r in wrong:
        why = "; ".join(r.warnings) if getattr(r, "warnings", None) else ""
        if r.kind == "preference":
            cols = ", ".join(f"{k}={v!r}" for k, v in r.schema.items() if k in ("prompt", "chosen", "rejected") and v)
            lines.append(f"{r.path}: preference pairs ({cols}); the SFT track takes conversations, "
                         "not chosen/rejected pairs (map one side explicitly in a config schema to use it)")
        else:
            lines.append(f"{r.path}: looks like {r.kind} data (confidence {r.confidence:.2f})" + (f": {why}" if why else ""))
    hint = "" if any(r.kind == "preference" for r in wrong) else "\nPass --force to process it anyway."
    raise RoutingError(f"refusing input(s) that do not belong to the {track} track:\n  " + "\n  ".join(lines) + hint)


def parity_texts(files: list[InputFile], schemas: dict[str, dict], *, text_mode: str, per_file: int = 4,
                 max_chars: int = 4_000, budget: int = 200_000) -> list[str]:
    """A few real documents of the inputs, for the fast tokenizer's start-up parity check.

    Bounded (``budget`` characters in all): the reference encoder checks them at a few MB/s.
    """
    from tokenmill.io import sample_records

    texts: list[str] = []
    for f in files:
        field = (schemas.get(f.rel) or {}).get("text") or "text"
        rows = sample_records(f, n=per_file, text_mode=text_mode)[0]
        for r in rows:
            if isinstance(r.get(field), str) and budget > 0:
                texts.append(r[field][:min(max_chars, budget)])
                budget -= len(texts[-1])
        if budget <= 0:
            break
    return texts


def run_fingerprint(track: str, files: list[InputFile], tokenizer: Any, config: dict) -> str:
    h = hashlib.sha256(track.encode())
    for f in files:
        h.update(f"{f.path}\0{f.size}\0{f.format}\0".encode())
    h.update(tokenizer.fingerprint.encode())
    h.update(json.dumps(config, sort_keys=True, default=str).encode())
    return h.hexdigest()


def prepare_run(
    track: str,
    inputs: Sequence[str],
    *,
    out: str | Path,
    tokenizer: Any,
    force: bool,
    unit_bytes: int,
    text_mode: str,
    config: dict | None,
    schemas: dict[str, dict] | None = None,
    exclude: Sequence[str] = (),
    skip_misrouted: bool = False,
    limit: int | None = None,
) -> TrackRun:
    from tokenmill import selection
    from tokenmill.tokenize.isolated import load_tokenizer_isolated

    started = time.monotonic()
    files, excluded = selection.exclude_files(expand_inputs(list(inputs), text_mode=text_mode), exclude)
    routes = selection.route_all(files, text_mode=text_mode)
    given = schemas or {}
    skipped: list[dict] = []
    if skip_misrouted:
        files, routes, skipped = selection.split_misrouted(track, files, routes, given)
    # an explicit mapping is the user's own routing decision; every other input is checked by the router
    unmapped = [r for f, r in zip(files, routes) if f.rel not in given and "*" not in given]
    refuse_misrouted(track, unmapped, force=force)
    picked = {f.rel: given.get(f.rel) or given.get("*") or r.schema for f, r in zip(files, routes)}
    if hasattr(tokenizer, "encode_batch"):
        tok = tokenizer
    else:
        sample = parity_texts(files, picked, text_mode=text_mode) if track == "pretrain" else None
        tok = load_tokenizer_isolated(tokenizer, parity_sample=sample)
    units = plan_units(files, unit_bytes=unit_bytes if limit is None else 1 << 62)  # limit: one unit per input
    cfg = dict(config or {})
    cfg.update({"unit_bytes": unit_bytes, "text_mode": text_mode})
    cfg.update({k: v for k, v in (("excluded", excluded), ("skipped_inputs", skipped), ("limit", limit)) if v})
    return TrackRun(track, Path(out), tok, files, routes, picked, units, cfg, started)


def finish_run(
    run: TrackRun,
    task: Callable,
    *,
    workers: int | None,
    overwrite: bool,
    progress: bool | None,
    summarize: Callable[[list[dict]], dict] | None = None,
    chat_template: str | None = None,
) -> dict:
    fingerprint = run_fingerprint(run.track, run.files, run.tokenizer, run.config)
    results = run_units(run.units, task, out=run.out, fingerprint=fingerprint, workers=workers,
                        overwrite=overwrite, progress=progress)
    n_rejects = merge_rejects(run.out, [u.name for u in run.units])
    inputs = [{**r.to_dict(), "schema_used": run.schemas[f.rel]} for f, r in zip(run.files, run.routes)]
    manifest = build_manifest(
        track=run.track, inputs=inputs, tokenizer=run.tokenizer.info(chat_template=chat_template),
        config=run.config, results=results, seconds=time.monotonic() - run.started,
        report=summarize(results) if summarize else None,
    )
    manifest["rejects_file"] = "rejects.jsonl" if n_rejects else None
    from tokenmill.selection import per_source

    manifest["sources"] = per_source(run.units, results)  # records, kept and tokens of every input
    write_manifest(run.out, manifest)
    return manifest


def print_summary(manifest: dict, out: Path, *, stream=None) -> None:
    stream = stream or sys.stdout  # looked up at call time: sys.stdout may have been replaced since import
    c = manifest["counts"]
    print(f"{manifest['track']}: {c['kept']:,} kept of {c['input']:,} records, {c['tokens']:,} tokens "
          f"in {len(manifest['shards'])} shard(s) -> {out}", file=stream)
    print(manifest["identity"], file=stream)
    print(tokenizer_line(manifest.get("tokenizer") or {}), file=stream)
    sources = manifest.get("sources") or {}
    for rel, row in sources.items() if len(sources) > 1 else ():
        print(f"  {rel}: {row['kept']:,} kept of {row['records']:,} records, {row['tokens']:,} tokens", file=stream)
    for item in manifest["config"].get("skipped_inputs") or []:
        print(f"skipped {item['path']}: {item['kind']} data, not {manifest['track']}", file=stream)
    for rel in manifest["config"].get("excluded") or []:
        print(f"excluded {rel}", file=stream)
    if manifest.get("rejects_file"):
        print(f"rejects: {Path(out) / manifest['rejects_file']}", file=stream)
    print(f"manifest: {Path(out) / 'manifest.json'}", file=stream)


def tokenizer_line(info: dict) -> str:
    """``tokenizer: NAME (vocab N, fingerprint 0123456789ab, PATH)``: which ids the shards hold, in every summary."""
    where = info.get("path") or info.get("origin") or ""
    return (f"tokenizer: {info.get('name')} (vocab {info.get('vocab_size') or 0:,}, fingerprint "
            f"{str(info.get('fingerprint'))[:12]}{', ' + where if where else ''})")
