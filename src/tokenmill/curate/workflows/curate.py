"""``tokenmill curate``: documents in, curated documents + decision ledger + funnel + report out.

The steps become a workflow (:mod:`tokenmill.engine.workflow`): consecutive document steps share one map
stage (one pass over the text); a corpus step (:class:`~tokenmill.steps.contract.CorpusStep`) contributes its own stages,
which read the documents stage before it and end in a documents stage of their own. The first map stage
reads the input work units (same readers, router refusal, rejects and accounting as ``tokenmill
pretrain``); the last stage is always a map stage writing ``documents/`` (with no steps when the list
ends with a corpus step), so the kept documents are in one place whatever the steps.

Output directory: ``documents/<unit>.parquet`` (id, text, source, url, license, meta, loc),
``ledger/<unit>.parquet``, ``steps/<stage>/ledger-<pack>.zip`` (each stage's parts, one stored zip per pack
of units, written with the ledger by the last stage, :mod:`tokenmill.curate.workflows.join`), ``manifest.json``
(steps, counts, identity, funnel), ``rejects.jsonl``, ``report.html``. The intermediate documents of
earlier stages (``_work/<stage>/documents/``, ``steps/<step>/docs/``) are dropped by the last stage that
reads them, once it has ended (``StagePlan.drop``): a finished run leaves no copy of the corpus but
``documents/``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill.curate.report.funnel import funnel_from_ledger
from tokenmill.curate.report.html import write_report
from tokenmill.curate.workflows.join import STAGE as JOIN
from tokenmill.curate.workflows.join import VERSION as JOIN_VERSION
from tokenmill.curate.workflows.join import decision_ledger, join_stage, stage_packs
from tokenmill.curate.workflows.presets import step_specs
from tokenmill.curate.workflows.tasks import DocsTask, ReadTask
from tokenmill.engine.outputs import Documents, outputs
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult, stage_key
from tokenmill.engine.warm import start_workers
from tokenmill.errors import ConfigError
from tokenmill.job.inputs import Inputs
from tokenmill.job.options import JobOptions
from tokenmill.job.run import Job, Results, Run, unit_size
from tokenmill.job.run import run as run_job
from tokenmill.report.accounting import Stats
from tokenmill.steps.build import build_steps
from tokenmill.steps.cascade import Cascade
from tokenmill.steps.contract import CorpusStep, Step, is_corpus_step, stage_entry, step_entry, step_packages

if TYPE_CHECKING:
    from tokenmill.engine.stage import Task
    from tokenmill.engine.workflow import Executor
    from tokenmill.tokenize.sources import TokenizerSpec
    from tokenmill.tokenize.tokenizer import Tokenizer

FIRST = "curate"


def group_steps(steps: Sequence[Step]) -> list[list[Step] | CorpusStep]:
    """``[doc, doc, corpus, doc]`` -> ``[[doc, doc], corpus, [doc]]``; always ends with a list."""
    groups: list[list[Step] | CorpusStep] = []
    current: list[Step] = []
    for step in steps:
        if is_corpus_step(step):
            groups += [current, step]
            current = []
        else:
            current.append(step)
    groups.append(current)
    _check_names(groups)
    return groups


def _check_names(groups: list[list[Step] | CorpusStep]) -> None:
    for group in groups:
        if isinstance(group, list):
            names = [s.name for s in group]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ConfigError(f"steps: {', '.join(twice)} appear(s) twice in a row; their ledger columns "
                                  "would collide (merge the two into one step)")


LEDGER_PARTS = "steps/*/ledger"  # every documents stage's ledger parts (steps/ledger.py: ledger_part)

def _unguarded(task: Task) -> Task:
    return task


def _map_stage(name: str, steps: list[Step], *, upstream: str | None, final: bool, inputs: Inputs, out: Path,
               text_mode: str, score_removed: bool, limit: int | None = None, guard: Callable = _unguarded) -> Stage:
    docs_dir = "documents" if final else f"_work/{name}/documents"
    cascade = Cascade(tuple(steps), score_removed=score_removed)
    params = {"steps": [stage_entry(s) for s in steps], "docs": docs_dir,
              "score_removed": score_removed}

    def plan(ctx: StageContext) -> StagePlan:
        if upstream is None:
            units = [Unit(u.index, u.name, unit_size(u), payload=u) for u in inputs.units]
            return StagePlan(units, guard(ReadTask(cascade, inputs.schemas, name, docs_dir, text_mode, limit=limit)), params)
        prior = outputs(ctx.results[upstream], Documents, stage=upstream)
        units = [Unit(i, _unit_name(r, i), 0, payload=r.docs) for i, r in enumerate(prior)]
        return StagePlan(units, DocsTask(cascade, name, docs_dir, str(out)), params)

    return Stage(name, 1, plan)


def _unit_name(result: Documents, index: int) -> str:
    """An upstream documents unit's name: the input unit's, so every stage's files line up with the input."""
    return result.unit or Path(result.docs).stem or f"unit-{index:06d}"


def compose(steps: Sequence[Step], *, inputs: Inputs, out: Path, text_mode: str,
            score_removed: bool, limit: int | None = None, guard: Callable = _unguarded) -> tuple[list[Stage], list[dict]]:
    """The workflow's stages and, per step, the stage it runs in (for the manifest and the funnel); ``guard``
    wraps the task that reads the input units (the run's input snapshot check)."""
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
                               text_mode=text_mode, score_removed=score_removed, limit=limit, guard=guard)
            stages.append(stage if upstream is None else _dropping_docs_of(stage, upstream))
            placed += [step_entry(s, name, "document") for s in group]
            upstream = name
        else:
            if upstream is None:  # never: group_steps starts with a list, the stage that reads the inputs
                raise ValueError("a corpus step needs a documents stage before it")
            corpus = list(group.stages(upstream))
            last = corpus[-1] if upstream is None else _dropping_docs_of(corpus[-1], upstream)
            stages += [*corpus[:-1], last]
            placed.append(step_entry(group, corpus[-1].name, "corpus"))
            upstream = corpus[-1].name
    return stages, placed


def _ledger_parts_in_segments(stage: Stage) -> Stage:
    """``stage``, its units' ledger parts (``steps/<stage>/ledger/``) written to segment files: the ledger
    stage packs them and drops the folder (base/segments.py)."""
    def plan(ctx: StageContext) -> StagePlan:
        inner = stage.plan(ctx)
        return replace(inner, segments=(*inner.segments, LEDGER_PARTS))

    return Stage(stage.name, stage.version, plan)


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
    executor: Executor | None = None,
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
    finish: Callable[[Path, dict], Any] | None = None,
) -> dict:
    """Curate ``inputs`` into ``out``; return the manifest (also written to ``out/manifest.json``).

    ``steps`` are specs (``{name: ..., param: ...}``), run after the ``preset``'s; ``quality_model`` is the
    model of the preset's quality step (``dclm``), ``robots_snapshot`` the snapshot of its robots step
    (``consent``). ``executor`` is any
    :class:`~tokenmill.engine.workflow.Executor` (default: the local process pool with ``workers``), e.g.
    :class:`~tokenmill.engine.ray.RayExecutor`; give one of the two. ``exclude``, ``skip_misrouted``,
    ``limit`` and ``dry_run``: :mod:`tokenmill.selection` (a dry run returns the plan and writes nothing).
    ``workflow``: the command recorded as the output's owner (``decontaminate`` runs through here too);
    ``finish(out, manifest)``: what the command derives from the manifest, written while the output is held.
    The run itself is :func:`tokenmill.job.run` of :func:`curate_job`.
    """
    specs = step_specs(preset, steps, quality_model=quality_model, robots_snapshot=robots_snapshot)
    job = curate_job(specs, preset=preset, score_removed=score_removed, report=report, workflow=workflow, finish=finish)
    options = JobOptions(workers=workers, force=force, overwrite=overwrite, unit_bytes=unit_bytes, text_mode=text_mode,
                         exclude=tuple(exclude), skip_misrouted=skip_misrouted, limit=limit, dry_run=dry_run,
                         no_progress=progress is False)
    return run_job(job, inputs, out=out, options=options, executor=executor, tokenizer=None, schemas=schemas)


def curate_job(specs: Sequence[dict | Step], *, preset: str | None = None, score_removed: bool = True, report: bool = True,
               workflow: str = "curate", finish: Callable[[Path, dict], Any] | None = None) -> Job:
    """The ``curate`` job (``workflow``: also ``decontaminate``): documents in, curated documents, the decision
    ledger, the funnel and the HTML report out; its stages are the steps' (:func:`compose`) and the ledger's."""
    built = build_steps(specs, source="steps")

    def configure(run: Run) -> tuple[list[Stage], list[dict]]:
        run.config.update({"preset": preset,
                           "steps": [s if isinstance(s, dict) else step_entry(s, "", "object") for s in specs],
                           "score_removed": score_removed, "schemas": run.inputs.schemas, **step_packages(built)})
        return compose(built, inputs=run.inputs, out=run.out, text_mode=run.options.text_mode,
                       score_removed=score_removed, limit=run.options.limit, guard=run.guarded)

    def stages(run: Run) -> list[Stage]:
        units = run.inputs.units
        ledger = join_stage(run.out, [u.name for u in units], [unit_size(u) for u in units],
                            lambda ctx: stage_ledgers(run.plan[0], ctx.results))
        return [*(_ledger_parts_in_segments(s) for s in run.plan[0]), ledger]

    def section(run: Run, results: Results, manifest: dict) -> dict:
        doc_stages, placed = run.plan
        out = curate_section(doc_stages, placed, results)
        out["decision_ledger"] = decision_ledger(results[JOIN])
        out["funnel"] = funnel_from_ledger(run.out, {**manifest, **out})
        return out

    def after(run: Run, manifest: dict, results: Results) -> None:
        if report:
            samples: dict[str, list] = {}
            for rs in results.values():
                for r in rs:
                    for reason, docs in (r.data.get("samples") or {}).items():  # a report extra, any stage
                        samples.setdefault(reason, []).extend(docs)
            write_report(run.out, manifest, samples)
        if finish is not None:
            finish(run.out, manifest)

    def warm(executor: Executor, inputs: Sequence[str], options: JobOptions,
             tokenizer: TokenizerSpec | Tokenizer | None) -> Callable[[list], None] | None:
        return start_workers(executor, built, unit_bytes=options.unit_bytes)  # workers start while inputs are routed

    return Job(workflow, "pretrain", stages, section, configure=configure,
               counts=lambda run, results: total_stats(run.plan[0], results), warm=warm, after=after,
               describe=lambda run: {"steps": [p["id"] for p in run.plan[1]]})


def curate_section(stages: list[Stage], placed: list[dict], results: Results) -> dict:
    """The curate job's manifest section: its steps (each with its stage, and the cut of a corpus-wide one), its
    stages, the kept documents' files, every stage's ledger parts and the ledger's packs."""
    for entry in placed:  # a corpus-wide cut (quality's top_fraction) is known only once the stage has run
        cuts = {r.cut for r in outputs(results.get(entry["stage"], []), Documents, stage=entry["stage"])
                if r.cut is not None}
        if entry["kind"] == "corpus" and len(cuts) == 1:
            entry["cut"] = cuts.pop()
    last = results[stages[-1].name]
    return {"steps": placed, "stages": [s.key for s in stages] + [stage_key(JOIN, JOIN_VERSION)],
            "documents": [r.docs for r in outputs(last, Documents, stage=stages[-1].name)],
            "stage_ledgers": stage_ledgers(stages, results), "stage_packs": stage_packs(results[JOIN])}


def stage_ledgers(stages: Sequence[Stage], results: dict[str, list[UnitResult]]) -> dict[str, list[str]]:
    """Each documents stage's ledger parts (logical paths: ``steps/<stage>/ledger/<unit>.parquet``)."""
    return {s.name: [r.ledger for r in _documents(results[s.name], s.name) if r.ledger] for s in stages}


def _documents(results: list[UnitResult], stage: str) -> list[Documents]:
    """A stage's outputs as documents outputs; a stage that is not a documents stage has none."""
    return outputs(results, Documents, stage=stage) if all("docs" in r.data for r in results) else []
