"""What both tracks do around their per-unit task: route and refuse, plan units, run, account, report.

A track is a one-stage workflow (:func:`tokenmill.engine.run_workflow`): the ``shards`` stage maps the
track's task over the input's work units, and a finalize step merges the units' rejects and writes the
manifest. The executor (local pool by default, or any :class:`~tokenmill.engine.Executor`) is given by the
caller; the task never knows which one runs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenmill.base.inputs import InputFile, WorkUnit
from tokenmill.engine import LocalExecutor, Stage, StageContext, StagePlan, Unit, UnitResult, run_workflow
from tokenmill.engine.outdir import check_output_path, hold_output
from tokenmill.engine.progress import Progress
from tokenmill.errors import ConfigError, RoutingError
from tokenmill.io import plan_units
from tokenmill.io.paths import expand_inputs_report
from tokenmill.io.snapshot import guard_inputs
from tokenmill.report.manifest import build_manifest, write_manifest
from tokenmill.report.rejects import merge_rejects

SHARDS_STAGE = "shards"
# the module of each track's task, imported by pool workers as they start (see LocalExecutor.prepare)
TASK_MODULES = {"pretrain": "tokenmill.pretrain.run", "sft": "tokenmill.sft.run"}


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
    manifest: dict | None = None  # set by the finalize step
    skipped: list[dict] = field(default_factory=list)  # what the input walks left out, and why


def holding(executor: Any) -> Any:
    """``with holding(executor):`` keeps one set of workers for the whole run (when the executor can)."""
    return executor if hasattr(executor, "__enter__") else contextlib.nullcontext(executor)


def pick_executor(executor: Any, workers: int | None) -> Any:
    """The caller's executor, else a local pool of ``workers`` processes; never both."""
    if executor is None:
        return LocalExecutor(workers=workers)
    if workers is not None:
        raise ConfigError("give either workers= or executor= (set the number of workers on the executor)")
    return executor


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
        h.update(f"{f.path}\0{f.size}\0{f.format}\0".encode("utf-8", "surrogateescape"))  # any file name
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
    executor: Any = None,
    workers: int | None = None,
    exclude: Sequence[str] = (),
    skip_misrouted: bool = False,
    limit: int | None = None,
) -> TrackRun:
    """Resolve, route (refusing the other track's data), check the mappings, plan the work units and load
    the tokenizer (in a short-lived child process unless the run has one worker: then this process
    encodes, and keeps the encoders it loads). The executor, when it can, starts its workers first, so
    that they start while this runs. ``exclude``, ``skip_misrouted`` and ``limit``: :mod:`tokenmill.selection`.
    """
    from tokenmill import selection
    from tokenmill.route.mapping import check_mappings
    from tokenmill.tokenize.isolated import load_tokenizer_isolated
    from tokenmill.tokenize.tokenizer import Tokenizer

    started = time.monotonic()
    files, walk_skipped = expand_inputs_report(list(inputs), text_mode=text_mode)
    check_output_path(out, [*map(str, inputs), *(f.path for f in files)])  # engine/outdir.py
    files, excluded = selection.exclude_files(files, exclude)
    prepare = getattr(executor, "prepare", None)
    if callable(prepare):
        prepare(estimate_units(files, unit_bytes=unit_bytes), preload=(TASK_MODULES[track],))
    routes = selection.route_all(files, text_mode=text_mode)
    check_mappings(track, files, routes, schemas)  # every mapping against the fields each input has
    given = schemas or {}
    skipped: list[dict] = []
    if skip_misrouted:
        files, routes, skipped = selection.split_misrouted(track, files, routes, given)
    # an explicit mapping is the user's own routing decision; every other input is checked by the router
    unmapped = [r for f, r in zip(files, routes) if f.rel not in given and "*" not in given]
    refuse_misrouted(track, unmapped, force=force)
    picked = {f.rel: given.get(f.rel) or given.get("*") or r.schema for f, r in zip(files, routes)}
    units = plan_units(files, unit_bytes=unit_bytes if limit is None else 1 << 62)  # limit: one unit per input
    if isinstance(tokenizer, Tokenizer):  # already loaded; a tokenizers.Tokenizer object is a spec to load
        tok = tokenizer
    else:
        sample = parity_texts(files, picked, text_mode=text_mode) if track == "pretrain" else None
        tok = load_tokenizer_isolated(tokenizer, parity_sample=sample, isolate=_pool_size(workers, units) > 1)
    cfg = dict(config or {})
    cfg.update({"unit_bytes": unit_bytes, "text_mode": text_mode})
    cfg.update({k: v for k, v in (("excluded", excluded), ("skipped_inputs", skipped), ("limit", limit)) if v})
    return TrackRun(track, Path(out), tok, files, routes, picked, units, cfg, started, skipped=walk_skipped)


def estimate_units(files: list[InputFile], *, unit_bytes: int) -> int:
    """About how many work units ``files`` make, from their sizes alone (a hint for starting workers)."""
    splittable = ("jsonl", "parquet", "arrow")
    return sum(max(1, -(-f.size // max(unit_bytes, 1))) if f.format in splittable and not f.compression else 1
               for f in files)


def unit_size(unit: WorkUnit) -> int:
    """Bytes of input in ``unit`` for progress and ETA (the whole file when it is not a byte range)."""
    if unit.stop >= 0 and unit.file.format == "jsonl" and not unit.file.compression:
        return unit.stop - unit.start
    return unit.file.size


def input_units(run: TrackRun) -> list[Unit]:
    """One engine unit per input work unit (its payload), named after it."""
    return [Unit(w.index, w.name, unit_size(w), w) for w in run.units]


def shards_stage(run: TrackRun, task: Callable, *, bind: Callable[[StageContext], Callable] | None = None) -> Stage:
    """The track's last stage: ``task`` over the work units (each unit's payload is its ``WorkUnit``);
    ``bind(ctx)``, when given, makes the task from the results of the stages before it."""
    units = input_units(run)
    return Stage(SHARDS_STAGE, 1, lambda ctx: StagePlan(units, bind(ctx) if bind else task))


def _pool_size(workers: int | None, units: list[WorkUnit]) -> int:
    """The worker processes a run will start (the local executor's rule: no more than units)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(workers or cores, max(1, len(units)))


def finish_run(
    run: TrackRun,
    task: Callable,
    *,
    executor: Any,
    overwrite: bool,
    progress: bool | None,
    summarize: Callable[[list[UnitResult], Path], dict] | None = None,
    chat_template: str | None = None,
    before: Callable[[Callable], list[Stage]] | None = None,
    bind: Callable[[StageContext, Callable], Callable] | None = None,
) -> dict:
    """Run the track's workflow with ``executor``; return the manifest its finalize step wrote.

    ``before(guard)``: stages that run before the shards stage (the SFT track's corpus curation); ``guard``
    wraps a task over the input units with the run's input snapshot check. ``bind(ctx, guard)``: the shards
    stage's task, made from the results of those stages."""
    fingerprint = run_fingerprint(run.track, run.files, run.tokenizer, run.config)

    def finalize(ctx: StageContext) -> None:
        run.manifest = write_track_manifest(run, ctx.results[SHARDS_STAGE], summarize=summarize,
                                            chat_template=chat_template)

    with hold_output(run.out, overwrite=overwrite):  # exclusive lock until the manifest is written
        state = run.out / "_state" / f"{SHARDS_STAGE}_v1"
        checked = guard_inputs(task, run.files, state_dir=state, fingerprint=fingerprint)  # io/snapshot.py

        def guard(inner: Callable) -> Callable:
            return dataclasses.replace(checked, task=inner)

        last = shards_stage(run, checked, bind=(lambda ctx: bind(ctx, guard)) if bind else None)
        run_workflow([*(before(guard) if before else ()), last], out=run.out, fingerprint=fingerprint,
                     executor=executor, progress=stage_progress(progress), finalize=finalize, locked=True)
    return run.manifest


def write_track_manifest(run: TrackRun, results: list[UnitResult], *, summarize: Callable | None,
                         chat_template: str | None) -> dict:
    """Merge the units' rejects, then write ``manifest.json`` (once) and return it."""
    n_rejects = merge_rejects(run.out, [u.name for u in run.units])
    inputs = [{**r.to_dict(), "schema_used": run.schemas[f.rel]} for f, r in zip(run.files, run.routes)]
    manifest = build_manifest(
        track=run.track, inputs=inputs, tokenizer=run.tokenizer.info(chat_template=chat_template),
        config=run.config, results=results, shards=[s for r in results for s in r.data["shards"]],
        seconds=time.monotonic() - run.started, report=summarize(results, run.out) if summarize else None,
    )
    manifest["rejects_file"] = "rejects.jsonl" if n_rejects else None
    manifest["skipped_inputs"] = run.skipped
    from tokenmill.selection import per_source

    manifest["sources"] = per_source(run.units, results)  # records, kept and tokens of every input
    write_manifest(run.out, manifest)
    return manifest


def stage_progress(enabled: bool | None) -> Callable[[str, list[Unit], dict[int, UnitResult]], Progress]:
    """A progress bar per stage: its units, their sizes, and the units a resume found done."""
    def start(key: str, units: list[Unit], done: dict[int, UnitResult]) -> Progress:
        bar = Progress(total_units=len(units), total_bytes=sum(u.size for u in units), enabled=enabled)
        bar.skip(len(done), list(done.values()))
        return bar

    return start


def staged_files(staging: Path) -> list[str]:
    """Every file a task wrote under ``staging``, relative to it (what the unit will commit)."""
    return sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())


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
