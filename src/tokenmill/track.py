"""What both tracks do around their per-unit task: route and refuse, plan units, run, account, report.

A track is a one-stage workflow (:func:`tokenmill.engine.run_workflow`): the ``shards`` stage maps the
track's task over the input's work units, and a finalize step merges the units' rejects and writes the
manifest. The executor (local pool by default, or any :class:`~tokenmill.engine.Executor`) is given by the
caller; the task never knows which one runs it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmill.base.inputs import InputFile, WorkUnit
from tokenmill.engine import Stage, StageContext, StagePlan, Unit, UnitResult, run_workflow
from tokenmill.engine.outputs import Shards, outputs
from tokenmill.io.snapshot import guard_inputs
from tokenmill.io.units import auto_unit_bytes
from tokenmill.job import Inputs, estimate_units, hold_job, job_fingerprint, plan_inputs, resolve_out, stage_progress
from tokenmill.job.early import TASK_MODULES, start_fork_server
from tokenmill.report.manifest import build_manifest, write_manifest
from tokenmill.report.rejects import merge_rejects

SHARDS_STAGE = "shards"


@dataclass
class TrackRun:
    track: str
    out: Path
    tokenizer: Any
    inputs: Inputs
    config: dict
    started: float
    manifest: dict | None = None  # set by the finalize step
    store: Any = None  # object storage the outputs are published to (out is then the local work dir)

    @property
    def files(self) -> list[InputFile]:
        return self.inputs.files

    @property
    def routes(self) -> list[Any]:
        return self.inputs.routes

    @property
    def schemas(self) -> dict[str, dict]:
        return self.inputs.schemas

    @property
    def units(self) -> list[WorkUnit]:
        return self.inputs.units

    @property
    def skipped(self) -> list[dict]:
        """What the input walks left out, and why."""
        return self.inputs.walk_skipped

    @property
    def where(self) -> str:
        """Where the outputs go: the bucket URL, or the output directory."""
        return self.store.url if self.store is not None else str(self.out)


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


def prepare_run(
    track: str,
    inputs: Sequence[str],
    *,
    out: str | Path,
    tokenizer: Any,
    force: bool,
    unit_bytes: int | None,
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
    from tokenmill.tokenize import prebuild
    from tokenmill.tokenize.isolated import load_tokenizer_isolated
    from tokenmill.tokenize.tokenizer import Tokenizer

    started = time.monotonic()
    prepare = getattr(executor, "prepare", None)
    if callable(prepare):  # the fork server's boot and encoder build are the run's longest wait before its first
        # unit: started before the inputs are listed when their names and sizes say a pool will run, as the command
        # line starts it (job/early.py); a server already running is left as it is
        start_fork_server(track, inputs, workers=getattr(executor, "workers", workers), unit_bytes=unit_bytes,
                          tokenizer=tokenizer)

    def start_workers(files: list[InputFile]) -> None:
        if callable(prepare):
            with prebuild.hint(tokenizer):  # both tracks' workers encode with the fast encoder the fork server builds
                prepare(estimate_units(files, unit_bytes=unit_bytes), preload=prebuild.with_server(TASK_MODULES[track]))

    planned = plan_inputs(track, inputs, text_mode=text_mode, schemas=schemas, exclude=exclude, force=force,
                          skip_misrouted=skip_misrouted, unit_bytes=unit_bytes, limit=limit, on_files=start_workers)
    out, store = resolve_out(out, [*map(str, inputs), *(f.path for f in planned.files)])
    if isinstance(tokenizer, Tokenizer):  # already loaded; a tokenizers.Tokenizer object is a spec to load
        tok = tokenizer
    else:
        sample = parity_texts(planned.files, planned.schemas, text_mode=text_mode) if track == "pretrain" else None
        tok = load_tokenizer_isolated(tokenizer, parity_sample=sample, isolate=_pool_size(workers, planned.units) > 1)
    cfg = dict(config or {})
    cfg.update({"unit_bytes": auto_unit_bytes(planned.files) if unit_bytes is None else unit_bytes,
                "text_mode": text_mode})
    cfg.update(planned.selection())
    if limit:
        cfg["limit"] = limit
    return TrackRun(track, Path(out), tok, planned, cfg, started, store=store)


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


def track_stages(run: TrackRun, checked: Any, *, before: Callable | None = None,
                 bind: Callable | None = None) -> list[Stage]:
    """The track's workflow: the ``shards`` stage, after a ``val_rank`` stage when ``--val-count`` needs its cut.

    ``checked`` is the track's task wrapped by :func:`guard_inputs`; its task's ``split`` (or None) says
    which (see :mod:`tokenmill.split`).
    """
    from dataclasses import replace

    from tokenmill.split import RANK_STAGE, RankTask, find_cut

    def guard(inner: Callable) -> Callable:
        return replace(checked, task=inner)

    split = getattr(checked.task, "split", None)
    if split is None or split.count is None:
        last = shards_stage(run, checked, bind=(lambda ctx: bind(ctx, guard)) if bind else None)
        return [*(before(guard) if before else ()), last]
    if before is not None or bind is not None:  # run_sft refuses the combination before any work
        raise ValueError("a --val-count split takes no stages before the shards stage")
    units = input_units(run)
    ranking = replace(checked, task=RankTask(replace(checked.task, split=replace(split, ranking=True)), split.count))

    def plan_shards(ctx: StageContext) -> StagePlan:
        cut = find_cut(ctx.out, ctx.results[RANK_STAGE], split.count)
        task = replace(checked, task=replace(checked.task, split=replace(split, cut=cut)))
        return StagePlan(units, task, params={"val_cut": [str(cut[0]), str(cut[1])]})

    return [Stage(RANK_STAGE, 1, lambda ctx: StagePlan(units, ranking)), Stage(SHARDS_STAGE, 1, plan_shards)]


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
    amend: Callable[[Path, dict], dict] | None = None,
    pull: Sequence[str] = (),
    before: Callable[[Callable], list[Stage]] | None = None,
    bind: Callable[[StageContext, Callable], Callable] | None = None,
) -> dict:
    """Run the track's workflow with ``executor``; return the manifest its finalize step wrote.

    ``amend(out, manifest)`` adds to the written manifest (and rewrites it) inside finalize; ``pull``: the
    prefixes of an object-storage output that ``summarize`` or ``amend`` read (``_state/`` always comes).
    ``before(guard)``: stages that run before the shards stage (the SFT track's corpus curation); ``guard``
    wraps a task over the input units with the run's input snapshot check. ``bind(ctx, guard)``: the shards
    stage's task, made from the results of those stages.
    """
    fingerprint = job_fingerprint(run.track, run.files, run.config, tokenizer=run.tokenizer)

    def finalize(ctx: StageContext) -> None:
        run.manifest = write_track_manifest(run, ctx.results[SHARDS_STAGE], summarize=summarize,
                                            chat_template=chat_template)
        if amend is not None:
            run.manifest = amend(run.out, run.manifest)

    with hold_job(run.out, workflow=run.track, overwrite=overwrite, store=run.store):  # locked until the manifest
        state = run.out / "_state" / f"{SHARDS_STAGE}_v1"
        checked = guard_inputs(task, run.files, state_dir=state, fingerprint=fingerprint)  # io/snapshot.py
        run_workflow(track_stages(run, checked, before=before, bind=bind), out=run.out, fingerprint=fingerprint,
                     executor=executor, progress=stage_progress(progress), finalize=finalize, locked=True,
                     store=run.store, pull=pull)
    return run.manifest


def write_track_manifest(run: TrackRun, results: list[UnitResult], *, summarize: Callable | None,
                         chat_template: str | None) -> dict:
    """Merge the units' rejects, then write ``manifest.json`` (once) and return it."""
    n_rejects = merge_rejects(run.out, [u.name for u in run.units])
    manifest = build_manifest(
        track=run.track, inputs=run.inputs.manifest_inputs(), tokenizer=run.tokenizer.info(chat_template=chat_template),
        config=run.config, results=results,
        shards=[s for r in outputs(results, Shards, stage=SHARDS_STAGE) for s in r.shards],
        seconds=time.monotonic() - run.started, report=summarize(results, run.out) if summarize else None,
    )
    manifest["rejects_file"] = "rejects.jsonl" if n_rejects else None
    manifest["skipped_inputs"] = run.skipped
    from tokenmill.selection import per_source

    manifest["sources"] = per_source(run.units, results)  # records, kept and tokens of every input
    origins: dict[str, dict[str, int]] = {}
    for r in results:  # documents that carry their origin (curated ones): kept and tokens per original input
        for source, row in (r.data.get("origins") or {}).items():
            acc = origins.setdefault(source, {"kept": 0, "tokens": 0})
            acc["kept"] += row["kept"]
            acc["tokens"] += row["tokens"]
    if origins:
        manifest["origins"] = dict(sorted(origins.items()))
    if "val_split" in run.config:
        manifest["split"] = write_val_manifest(run.out, manifest, results)
    write_manifest(run.out, manifest)
    if run.track == "pretrain":
        from tokenmill.report.datacard import write_datacard

        write_datacard(run.out, manifest)
    return manifest


def write_val_manifest(out: Path, manifest: dict, results: list[UnitResult]) -> dict:
    """Write ``val/manifest.json`` (the validation shard set's own, so ``open_shards(out/val)`` checks it
    against its shards) and return the main manifest's ``split`` section: train and val counts."""
    from tokenmill.split import VAL_DIR, split_counts

    val = split_counts(results)
    counts = manifest["counts"]
    train = {"documents": counts["kept"] - val["documents"], "tokens": counts["tokens"] - val["tokens"],
             "shards": len(manifest["shards"]), "directory": "."}
    section = {**manifest["config"]["val_split"], "train": train,
               "val": {"documents": val["documents"], "tokens": val["tokens"], "shards": len(val["shards"]),
                       "directory": VAL_DIR}}
    (out / VAL_DIR).mkdir(exist_ok=True)
    write_manifest(out / VAL_DIR, {
        "tokenmill": manifest["tokenmill"], "track": manifest["track"], "split": "val",
        "tokenizer": manifest["tokenizer"], "config": manifest["config"],
        "counts": {"kept": val["documents"], "tokens": val["tokens"]}, "shards": val["shards"],
        "of": "../manifest.json",
    })
    return section


def staged_files(staging: Path) -> list[str]:
    """Every file a task wrote under ``staging``, relative to it (what the unit will commit)."""
    return sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())


def print_summary(manifest: dict, out: Path, *, stream=None) -> None:
    stream = stream or sys.stdout  # looked up at call time: sys.stdout may have been replaced since import
    c = manifest["counts"]
    print(f"{manifest['track']}: {c['kept']:,} kept of {c['input']:,} records, {c['tokens']:,} tokens "
          f"in {len(manifest['shards'])} shard(s) -> {out}", file=stream)
    print(manifest["identity"], file=stream)
    if manifest.get("split"):
        print(split_line(manifest["split"], out, noun="examples" if manifest["track"] == "sft" else "documents"),
              file=stream)
    pretrain = manifest["track"] == "pretrain"
    print(tokenizer_line(manifest.get("tokenizer") or {}, appended=pretrain), file=stream)
    if pretrain and (manifest["config"].get("eos") or {}).get("warning"):
        print(f"warning: {manifest['config']['eos']['warning']}", file=stream)
    sources = manifest.get("sources") or {}
    for rel, row in sources.items() if len(sources) > 1 else ():
        print(f"  {rel}: {row['kept']:,} kept of {row['records']:,} records, {row['tokens']:,} tokens", file=stream)
    for item in manifest.get("inputs") or []:  # what the router noticed (a label column, split evidence ...)
        for warning in item.get("warnings") or []:
            print(f"warning: {item.get('path')}: {warning}", file=stream)
    for item in manifest["config"].get("skipped_inputs") or []:
        print(f"skipped {item['path']}: {item['kind']} data, not {manifest['track']}", file=stream)
    for rel in manifest["config"].get("excluded") or []:
        print(f"excluded {rel}", file=stream)
    if manifest.get("rejects_file"):
        print(f"rejects: {joined(out, manifest['rejects_file'])}", file=stream)
    print(f"manifest: {joined(out, 'manifest.json')}", file=stream)


def joined(out: Any, name: str) -> str:
    """``out/name`` for a directory or a URL (``Path`` would fold the ``//`` of ``s3://``)."""
    url = getattr(out, "url", out)
    return f"{url.rstrip('/')}/{name}" if isinstance(url, str) and "://" in url else str(Path(out) / name)


def split_line(split: dict, out: Path, *, noun: str = "documents") -> str:
    """``split: train N documents, T tokens; val n documents, t tokens ... -> OUT/val (fraction 0.05, seed 0)``."""
    train, val = split["train"], split["val"]
    how = f"count {split['val_count']:,}" if split.get("val_count") else f"fraction {split['val_fraction']}"
    return (f"split: train {train['documents']:,} {noun}, {train['tokens']:,} tokens; val {val['documents']:,} "
            f"{noun}, {val['tokens']:,} tokens in {val['shards']} shard(s) -> {joined(out, val['directory'])} "
            f"({how}, seed {split['val_seed']})")


def tokenizer_line(info: dict, *, appended: bool = False) -> str:
    """``tokenizer: NAME (vocab N, fingerprint 0123456789ab, PATH)``: which ids the shards hold, in every summary;
    with ``appended`` (pretraining), also the BOS put before and the EOS put after every document."""
    where = info.get("path") or info.get("origin") or ""
    line = (f"tokenizer: {info.get('name')} (vocab {info.get('vocab_size') or 0:,}, fingerprint "
            f"{str(info.get('fingerprint'))[:12]}{', ' + where if where else ''})")
    if not appended:
        return line
    bos = f"prepends BOS {info.get('bos_token')!r} (id {info.get('bos_id')}), " if info.get("add_bos") else ""
    return f"{line}; {bos}appends EOS {info.get('eos_token')!r} (id {info.get('eos_id')}) to every document"
