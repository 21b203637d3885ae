"""``tokenmill curate``: documents in, curated documents + decision ledger + funnel + report out.

The steps become a workflow (:mod:`tokenmill.engine.workflow`): consecutive document steps share one map
stage (one pass over the text); a corpus step (``registry.is_corpus_step``) contributes its own stages,
which read the documents stage before it and end in a documents stage of their own. The first map stage
reads the input work units (same readers, router refusal, rejects and accounting as ``tokenmill
pretrain``); the last stage is always a map stage writing ``documents/`` (with no steps when the list
ends with a corpus step), so the kept documents are in one place whatever the steps.

Output directory: ``documents/<unit>.parquet`` (id, text, source, url, license, meta, loc),
``ledger/<unit>.parquet``, ``steps/<stage>/ledger-<pack>.zip`` (each stage's parts, one stored zip per pack
of units, written with the ledger by the last stage, :mod:`tokenmill.curate.join`), ``manifest.json``
(steps, counts, identity, funnel), ``rejects.jsonl``, ``report.html``. The intermediate documents of
earlier stages (``_work/<stage>/documents/``, ``steps/<step>/docs/``) are dropped by the last stage that
reads them, once it has ended (``StagePlan.drop``): a finished run leaves no copy of the corpus but
``documents/``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenmill.curate.build import build_steps, step_specs
from tokenmill.curate.cascade import Cascade
from tokenmill.curate.join import STAGE as JOIN
from tokenmill.curate.join import decision_ledger, join_stage, stage_packs
from tokenmill.curate.registry import is_corpus_step
from tokenmill.curate.step import step_id, step_params
from tokenmill.curate.tasks import DocsTask, ReadTask
from tokenmill.curate.warm import start_workers
from tokenmill.engine.outputs import Documents, outputs
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.io.units import auto_unit_bytes
from tokenmill.job import Inputs, hold_job, holding, job_fingerprint, pick_executor, plan_inputs, resolve_out, stage_progress
from tokenmill.report.accounting import Stats

FIRST = "curate"


def route_inputs(inputs: Sequence[str], *, force: bool = False, unit_bytes: int | None = None, text_mode: str = "auto",
                 schemas: dict[str, dict] | None = None, on_files: Any = None, **selection: Any) -> Inputs:
    """The inputs planned like the pretraining track's (:func:`tokenmill.job.plan_inputs`, refusing SFT data
    unless forced); ``selection``: ``exclude``, ``skip_misrouted``, ``limit``; ``unit_bytes`` None: automatic;
    ``on_files(files)``: called once the files are known, before routing (the workers start)."""
    return plan_inputs("pretrain", inputs, text_mode=text_mode, schemas=schemas, force=force, unit_bytes=unit_bytes,
                       on_files=on_files, **selection)


def group_steps(steps: Sequence[Any]) -> list[list[Any] | Any]:
    """``[doc, doc, corpus, doc]`` -> ``[[doc, doc], corpus, [doc]]``; always ends with a list."""
    groups: list[Any] = [[]]
    for step in steps:
        if is_corpus_step(step):
            groups.append(step)
            groups.append([])
        else:
            groups[-1].append(step)
    _check_names(groups)
    return groups


def _check_names(groups: list) -> None:
    for group in groups:
        if isinstance(group, list):
            names = [s.name for s in group]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ConfigError(f"steps: {', '.join(twice)} appear(s) twice in a row; their ledger columns "
                                  "would collide (merge the two into one step)")


def _map_stage(name: str, steps: list, *, upstream: str | None, final: bool, inputs: Inputs, out: Path,
               text_mode: str, score_removed: bool, limit: int | None = None) -> Stage:
    docs_dir = "documents" if final else f"_work/{name}/documents"
    cascade = Cascade(tuple(steps), score_removed=score_removed)
    params = {"steps": [{"id": step_id(s), "params": step_params(s)} for s in steps], "docs": docs_dir,
              "score_removed": score_removed}

    def plan(ctx: StageContext) -> StagePlan:
        if upstream is None:
            units = [Unit(u.index, u.name, _unit_size(u), payload=u) for u in inputs.units]
            return StagePlan(units, ReadTask(cascade, inputs.schemas, name, docs_dir, text_mode, limit=limit), params)
        prior = outputs(ctx.results[upstream], Documents, stage=upstream)
        units = [Unit(i, _unit_name(r, i), 0, payload=r.docs) for i, r in enumerate(prior)]
        return StagePlan(units, DocsTask(cascade, name, docs_dir, str(out)), params)

    return Stage(name, 1, plan)


def _unit_name(result: Documents, index: int) -> str:
    """An upstream documents unit's name: the input unit's, so every stage's files line up with the input."""
    return result.unit or Path(result.docs).stem or f"unit-{index:06d}"


def _unit_size(u: Any) -> int:
    return (u.stop - u.start) if u.stop >= 0 and u.file.format == "jsonl" and not u.file.compression else u.file.size


def compose(steps: Sequence[Any], *, inputs: Inputs, out: Path, text_mode: str,
            score_removed: bool, limit: int | None = None) -> tuple[list[Stage], list[dict]]:
    """The workflow's stages and, per step, the stage it runs in (for the manifest and the funnel)."""
    groups = group_steps(steps)
    stages: list[Stage] = []
    placed: list[dict] = []
    upstream: str | None = None
    for k, group in enumerate(groups):
        if isinstance(group, list):
            if k > 0 and not group and k != len(groups) - 1:
                continue
            name = FIRST if upstream is None else f"{FIRST}_{len(stages)}"
            stage = _map_stage(name, group, upstream=upstream, final=k == len(groups) - 1, inputs=inputs, out=out,
                               text_mode=text_mode, score_removed=score_removed, limit=limit)
            stages.append(stage if upstream is None else _dropping_docs_of(stage, upstream))
            placed += [_step_entry(s, name, "document") for s in group]
            upstream = name
        else:
            corpus = list(group.stages(upstream))
            stages += corpus[:-1] + [_dropping_docs_of(corpus[-1], upstream)]
            placed.append(_step_entry(group, corpus[-1].name, "corpus"))
            upstream = corpus[-1].name
    return stages, placed


def _dropping_docs_of(stage: Stage, upstream: str) -> Stage:
    """``stage``, the last to read the documents of stage ``upstream``, dropping them once it has ended."""
    def plan(ctx: StageContext) -> StagePlan:
        inner = stage.plan(ctx)
        return replace(inner, drop=(*inner.drop, *intermediate_docs(ctx, upstream)))

    return Stage(stage.name, stage.version, plan)


def intermediate_docs(ctx: StageContext, stage: str) -> tuple[str, ...]:
    """The directories of stage ``stage``'s documents files when they are intermediates (never ``documents/``)."""
    dirs = {str(Path(r.docs).parent) for r in outputs(ctx.results[stage], Documents, stage=stage)}
    return tuple(sorted(d for d in dirs if d.startswith("_work/") or (d.startswith("steps/") and d.endswith("/docs"))))


def _step_entry(step: Any, stage: str, kind: str) -> dict:
    return {"name": step.name, "version": step.version, "id": step_id(step), "kind": kind, "stage": stage,
            "params": step_params(step)}


def total_stats(stages: list[Stage], results: dict[str, list[UnitResult]]) -> Stats:
    """The run's counts: the first stage's input and rejects, every stage's filtered, the last one's kept."""
    acc = Stats()
    for k, stage in enumerate(stages):
        s = Stats()
        for r in results[stage.name]:
            s = s + r.stats
        if k == 0:
            acc = s
        else:
            acc.filtered.update(s.filtered)
            acc.extra.update(s.extra)
            acc.kept = s.kept
    return acc


def run_curate(
    inputs: Sequence[str],
    *,
    out: str | Path,
    steps: Sequence[dict] | None = None,
    preset: str | None = None,
    quality_model: str | None = None,
    robots_snapshot: str | None = None,
    workers: int | None = None,
    executor: Any = None,
    force: bool = False,
    overwrite: bool = False,
    unit_bytes: int | None = None,
    text_mode: str = "auto",
    schemas: dict[str, dict] | None = None,
    score_removed: bool = True,
    report: bool = True,
    progress: bool | None = None,
    exclude: Sequence[str] = (),
    skip_misrouted: bool = False,
    limit: int | None = None,
    dry_run: bool = False,
    workflow: str = "curate",
) -> dict:
    """Curate ``inputs`` into ``out``; return the manifest (also written to ``out/manifest.json``).

    ``steps`` are specs (``{name: ..., param: ...}``), run after the ``preset``'s; ``quality_model`` is the
    model of the preset's quality step (``dclm``), ``robots_snapshot`` the snapshot of its robots step
    (``consent``). ``executor`` is any
    :class:`~tokenmill.engine.workflow.Executor` (default: the local process pool with ``workers``), e.g.
    :class:`~tokenmill.engine.ray.RayExecutor`; give one of the two. ``exclude``, ``skip_misrouted``,
    ``limit`` and ``dry_run``: :mod:`tokenmill.selection` (a dry run returns the plan and writes nothing).
    ``workflow``: the command recorded as the output's owner (``decontaminate`` runs through here too).
    """
    from tokenmill.selection import input_plan

    started = time.monotonic()
    specs = step_specs(preset, steps, quality_model=quality_model, robots_snapshot=robots_snapshot)
    built = build_steps(specs, source="steps")
    executor = None if dry_run else pick_executor(executor, workers)
    with holding(executor):  # the workers start while the inputs are routed (curate/warm.py)
        routed = route_inputs(inputs, force=force, unit_bytes=unit_bytes, text_mode=text_mode, schemas=schemas,
                              exclude=exclude, skip_misrouted=skip_misrouted, limit=limit,
                              on_files=start_workers(executor, built, unit_bytes=unit_bytes))
        out, _ = resolve_out(out, [*map(str, inputs), *(f.path for f in routed.files)])
        stages, placed = compose(built, inputs=routed, out=out, text_mode=text_mode, score_removed=score_removed,
                                 limit=limit)
        config = {"preset": preset,
                  "steps": [s if isinstance(s, dict) else _step_entry(s, "", "object") for s in specs],
                  "unit_bytes": auto_unit_bytes(routed.files) if unit_bytes is None else unit_bytes,
                  "text_mode": text_mode, "score_removed": score_removed, "schemas": routed.schemas,
                  **routed.selection(), **({"limit": limit} if limit else {})}
        if dry_run:
            return {**input_plan(workflow, routed, out, config), "steps": [p["id"] for p in placed]}
        with hold_job(out, workflow=workflow, overwrite=overwrite):
            manifest = _run(stages, placed, routed, config, out=out, executor=executor, progress=progress,
                            workflow=workflow, report=report, started=started)
    return manifest


def _run(stages: list[Stage], placed: list[dict], routed: Inputs, config: dict, *, out: Path, executor: Any,
         progress: bool | None, workflow: str, report: bool, started: float) -> dict:
    """The stages, then the rejects, the manifest, the ledger, the funnel and the report."""
    from tokenmill.engine.workflow import run_workflow
    from tokenmill.report.rejects import merge_rejects

    stage_seconds: dict[str, float] = {}
    ledger = join_stage(out, [u.name for u in routed.units], [_unit_size(u) for u in routed.units],
                        lambda ctx: stage_ledgers(stages, ctx.results))
    results = run_workflow([*stages, ledger], out=out, fingerprint=job_fingerprint(workflow, routed.files, config),
                           executor=executor, progress=stage_progress(progress, stage_seconds), locked=True)
    n_rejects = merge_rejects(out, [u.name for u in routed.units])
    manifest = curate_manifest(routed, stages, placed, results, config, seconds=time.monotonic() - started)
    manifest["stages"].append(ledger.key)
    manifest["stage_packs"] = stage_packs(results[JOIN])
    manifest["track"] = workflow
    manifest["run"]["stage_seconds"] = stage_seconds  # this invocation's: a resumed stage shows its rest
    manifest["run"]["engine"] = getattr(executor, "name", type(executor).__name__)
    manifest["rejects_file"] = "rejects.jsonl" if n_rejects else None
    manifest["skipped_inputs"] = routed.walk_skipped  # what the directory walks left out, and why
    _finish(out, manifest, results, report=report)
    return manifest


def curate_manifest(routed: Inputs, stages: list[Stage], placed: list[dict], results: dict, config: dict,
                    *, seconds: float) -> dict:
    from tokenmill import __version__
    from tokenmill.engine.local import process_peak_rss_mb

    stats = total_stats(stages, results)
    last = results[stages[-1].name]
    for entry in placed:  # a corpus-wide cut (quality's top_fraction) is known only once the stage has run
        cuts = {r.cut for r in outputs(results.get(entry["stage"], []), Documents, stage=entry["stage"])
                if r.cut is not None}
        if entry["kind"] == "corpus" and len(cuts) == 1:
            entry["cut"] = cuts.pop()
    every = [r for s in stages for r in results[s.name]] + list(results.get(JOIN, []))
    step_seconds: dict[str, float] = {}
    for r in every:
        for k, v in r.step_seconds.items():
            step_seconds[k] = round(step_seconds.get(k, 0.0) + v, 3)
    return {
        "tokenmill": __version__,
        "track": "curate",
        "inputs": routed.manifest_inputs(),
        "config": config,
        "steps": placed,
        "stages": [s.key for s in stages],
        "counts": stats.to_dict(),
        "identity": stats.identity_line(),
        "documents": [r.docs for r in outputs(last, Documents, stage=stages[-1].name)],
        "stage_ledgers": stage_ledgers(stages, results),
        "run": {"seconds": round(seconds, 3), "step_seconds": step_seconds, "units": len(routed.units),
                "peak_rss": {"main_mb": process_peak_rss_mb(),
                             "largest_worker_mb": max((r.peak_rss_mb for r in every), default=0.0)}},
    }


def stage_ledgers(stages: Sequence[Stage], results: dict[str, list[UnitResult]]) -> dict[str, list[str]]:
    """Each documents stage's ledger parts (logical paths: ``steps/<stage>/ledger/<unit>.parquet``)."""
    return {s.name: [r.ledger for r in _documents(results[s.name], s.name) if r.ledger] for s in stages}


def _documents(results: list[UnitResult], stage: str) -> list[Documents]:
    """A stage's outputs as documents outputs; a stage that is not a documents stage has none."""
    return outputs(results, Documents, stage=stage) if all("docs" in r.data for r in results) else []


def _finish(out: Path, manifest: dict, results: dict, *, report: bool) -> None:
    from tokenmill.curate.funnel import funnel_from_ledger
    from tokenmill.report.manifest import write_manifest

    manifest["decision_ledger"] = decision_ledger(results[JOIN])
    manifest["funnel"] = funnel_from_ledger(out, manifest)
    write_manifest(out, manifest)
    from tokenmill.report.datacard import write_datacard

    write_datacard(out, manifest)
    if report:
        from tokenmill.curate.html import write_report

        samples: dict[str, list] = {}
        for rs in results.values():
            for r in rs:
                for reason, docs in (r.data.get("samples") or {}).items():  # a report extra, any stage
                    samples.setdefault(reason, []).extend(docs)
        write_report(out, manifest, samples)
