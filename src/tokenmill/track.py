"""What both token tracks (``pretrain``, ``sft``) share as jobs of :func:`tokenmill.job.run`: their stages,
their workers' warm-up, and their manifest section (tokenizer, shards, report, per-source counts, split).

A track's last stage, ``shards``, maps the track's task over the input's work units; a ``--val-count`` split
puts a ranking stage before it, and the SFT track's corpus steps theirs. The executor (local pool by
default, or any :class:`~tokenmill.engine.Executor`) is given by the caller; the task never knows which one
runs it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill.engine import Stage, StageContext, StagePlan, UnitResult
from tokenmill.engine.outputs import Shards, outputs
from tokenmill.engine.warm import TASK_MODULES, encoder_hint
from tokenmill.job.early import start_fork_server
from tokenmill.job.inputs import estimate_units
from tokenmill.report.manifest import write_manifest
from tokenmill.selection import per_source
from tokenmill.split import RANK_STAGE, VAL_DIR, RankTask, find_cut, split_counts

if TYPE_CHECKING:
    from tokenmill.engine.workflow import Executor
    from tokenmill.job.options import JobOptions
    from tokenmill.job.run import Results, Run
    from tokenmill.split import TrackTask
    from tokenmill.tokenize.sources import TokenizerSpec
    from tokenmill.tokenize.tokenizer import Tokenizer

SHARDS_STAGE = "shards"


def token_warm(track: str) -> Callable[..., Callable[[list], None] | None]:
    """A token track's warm-up (``Job.warm``): the fork server started from the inputs' names and sizes before
    they are listed, then the pool once the files are known; the server preloads the track's modules and
    builds the tokenizer's fast encoder, while the driver routes."""
    def warm(executor: Executor, inputs: Sequence[str], options: JobOptions,
             tokenizer: TokenizerSpec | Tokenizer | None) -> Callable[[list], None] | None:
        prepare = getattr(executor, "prepare", None)
        if not callable(prepare):
            return None
        start_fork_server(track, inputs, workers=getattr(executor, "workers", options.workers),
                          unit_bytes=options.unit_bytes, tokenizer=tokenizer)

        def start(files: list) -> None:
            with encoder_hint(tokenizer):  # both tracks' workers encode with the fast encoder the server builds
                prepare(estimate_units(files, unit_bytes=options.unit_bytes), preload=TASK_MODULES[track])

        return start

    return warm


def shards_stage(run: Run, task: Callable, *, bind: Callable[[StageContext], Callable] | None = None) -> Stage:
    """The track's last stage: ``task`` over the work units (each unit's payload is its ``WorkUnit``);
    ``bind(ctx)``, when given, makes the task from the results of the stages before it."""
    units = run.input_units()
    return Stage(SHARDS_STAGE, 1, lambda ctx: StagePlan(units, bind(ctx) if bind else task))


def track_stages(run: Run, task: TrackTask, *, before: Callable | None = None, bind: Callable | None = None) -> list[Stage]:
    """The track's stages: the ``shards`` stage, after a ``val_rank`` stage when ``--val-count`` needs its cut.

    Tasks over the input units are wrapped by ``run.guarded`` (the inputs' snapshot check); ``task.split`` (or
    None) says which split (see :mod:`tokenmill.split`). ``before(guard)``: stages before the shards stage;
    ``bind(ctx, guard)``: the shards stage's task, made from their results.
    """
    split = getattr(task, "split", None)
    if split is None or split.count is None:
        last = shards_stage(run, run.guarded(task), bind=(lambda ctx: bind(ctx, run.guarded)) if bind else None)
        return [*(before(run.guarded) if before else ()), last]
    if before is not None or bind is not None:  # run_sft refuses the combination before any work
        raise ValueError("a --val-count split takes no stages before the shards stage")
    units = run.input_units()
    ranking = run.guarded(RankTask(replace(task, split=replace(split, ranking=True)), split.count))

    def plan_shards(ctx: StageContext) -> StagePlan:
        cut = find_cut(ctx.out, ctx.results[RANK_STAGE], split.count)
        cut_task = run.guarded(replace(task, split=replace(split, cut=cut)))
        return StagePlan(units, cut_task, params={"val_cut": [str(cut[0]), str(cut[1])]})

    return [Stage(RANK_STAGE, 1, lambda ctx: StagePlan(units, ranking)), Stage(SHARDS_STAGE, 1, plan_shards)]


def shards_report(run: Run, results: Results, manifest: dict, *, chat_template: str,
                  summarize: Callable[[list[UnitResult], Path], dict] | None = None) -> dict:
    """A token track's manifest section: its tokenizer, shards, report, per-source counts, origins and split."""
    last = results[SHARDS_STAGE]
    section: dict[str, Any] = {
        "tokenizer": run.loaded_tokenizer.info(chat_template=chat_template),
        "shards": [s for r in outputs(last, Shards, stage=SHARDS_STAGE) for s in r.shards],
        "report": (summarize(last, run.out) if summarize else None) or {},
        "sources": per_source(run.inputs.units, last),  # records, kept and tokens of every input
    }
    origins: dict[str, dict[str, int]] = {}
    for r in last:  # documents that carry their origin (curated ones): kept and tokens per original input
        for source, row in (r.data.get("origins") or {}).items():
            acc = origins.setdefault(source, {"kept": 0, "tokens": 0})
            acc["kept"] += row["kept"]
            acc["tokens"] += row["tokens"]
    if origins:
        section["origins"] = dict(sorted(origins.items()))
    if "val_split" in run.config:
        section["split"] = write_val_manifest(run.out, {**manifest, **section}, last)
    return section


def write_val_manifest(out: Path, manifest: dict, results: list[UnitResult]) -> dict:
    """Write ``val/manifest.json`` (the validation shard set's own, so ``open_shards(out/val)`` checks it
    against its shards) and return the main manifest's ``split`` section: train and val counts."""
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


SOURCES_SHOWN = 20  # inputs the summary names with their counts; the manifest has every one


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
    for rel, row in list(sources.items())[:SOURCES_SHOWN] if len(sources) > 1 else ():
        print(f"  {rel}: {row['kept']:,} kept of {row['records']:,} records, {row['tokens']:,} tokens", file=stream)
    if len(sources) > SOURCES_SHOWN:  # 10,000 small files: not a screenful each
        print(f"  ... and {len(sources) - SOURCES_SHOWN:,} more inputs (their counts: manifest.json, sources)", file=stream)
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
