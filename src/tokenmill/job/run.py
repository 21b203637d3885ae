"""The one run sequence: every command that reads inputs and writes ``--out`` is a :class:`Job` run by :func:`run`.

A job says only what is its own: the kind of data it takes, whether it loads a tokenizer, the checks and
config entries that need the planned inputs (``configure``), its stages, its counts and its manifest section
(``report``). :func:`run` does everything around them, once, for every command:

1. the executor (the caller's, else a local pool of ``options.workers``), held for the whole run, its workers
   started while the inputs are routed (``warm``);
2. the inputs planned (:func:`~tokenmill.job.inputs.plan_inputs`: walk, ``--exclude``, routing that refuses
   the other kind of data, mappings, work units);
3. ``--out`` resolved (a directory, or an ``s3://`` prefix with its local work directory) and checked
   against the inputs;
4. the tokenizer loaded (token jobs) and the job configured; a dry run returns its plan here, writing nothing;
5. the fingerprint: the job, every input, the tokenizer, the config and the options a resume must match;
6. ``--out`` guarded and locked (:func:`~tokenmill.job.driver.hold_job`), the inputs snapshotted, the stages
   run on the executor, resuming at the first unfinished unit (:func:`~tokenmill.engine.run_workflow`);
7. finalize: the units' rejects merged, one manifest envelope (``tokenmill``, ``track``, ``inputs``,
   ``config``, ``counts``, ``identity``, ``run``, ``rejects_file``, ``skipped_inputs``) with the job's
   section, the data card, then what the job derives from them (``after``: the HTML report); with an
   ``s3://`` output all of it is published: unit by unit as the units commit (``Job.publish == "units"``,
   pretrain and sft) or, for a job whose later stages read the earlier ones' files, whole at the end from
   the work directory (``"end"``: what the run wrote, its fingerprints, the manifest last).

A command adds a job, never a step of this sequence: the shape of datatrove's ``_run_for_rank``, over
tokenmill's commit protocol (staging, rename, marker, fingerprint).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill import __version__
from tokenmill.base.accounting import Stats
from tokenmill.engine import Stage, StageContext, Unit, UnitResult, run_workflow
from tokenmill.engine.outdir import written_now
from tokenmill.engine.store import publish_run
from tokenmill.errors import ConfigError, TokenizerError
from tokenmill.io import sample_records
from tokenmill.io.snapshot import CheckedTask, snapshot_inputs
from tokenmill.io.units import auto_unit_bytes
from tokenmill.job.driver import hold_job, holding, job_fingerprint, pick_executor, resolve_out, stage_progress
from tokenmill.job.inputs import Inputs, plan_inputs
from tokenmill.job.invocation import pipeline_file
from tokenmill.job.options import JobOptions
from tokenmill.report.datacard import card_data, write_datacard
from tokenmill.report.manifest import peak_rss_mb, step_seconds, write_manifest
from tokenmill.report.rejects import merge_rejects
from tokenmill.selection import input_plan
from tokenmill.tokenize.isolated import load_tokenizer_isolated
from tokenmill.tokenize.tokenizer import Tokenizer

if TYPE_CHECKING:
    from tokenmill.base.inputs import WorkUnit
    from tokenmill.engine.stage import Task
    from tokenmill.engine.store import Store
    from tokenmill.engine.workflow import Executor
    from tokenmill.tokenize.sources import TokenizerSpec

Results = dict[str, list[UnitResult]]


def _no_config(run: Run) -> None:
    return None


def _no_pull(run: Run) -> tuple[str, ...]:
    return ()


def last_stage_counts(run: Run, results: Results) -> Stats:
    """The run's counts when its last stage sees every record: the sum of that stage's units."""
    acc = Stats()
    for r in results[run.stage_names[-1]]:
        acc = acc + r.stats
    return acc


@dataclass(frozen=True)
class Job:
    """What one command is: everything :func:`run` cannot know.

    ``configure(run)`` runs once the inputs are planned and the tokenizer loaded: it checks what needs them,
    adds its entries to ``run.config`` (they enter the fingerprint and the manifest) and returns the job's
    plan (its task, template ...), kept as ``run.plan``. ``stages(run)`` returns the stages; ``report(run,
    results, manifest)`` the job's manifest section (``manifest`` holds the envelope); ``counts(run,
    results)`` the run's accounting. ``warm(executor, paths, options, tokenizer)`` starts the executor's
    workers before the inputs are routed and may return a callback for the listed files. ``pull(run)``:
    the prefixes of an object-storage output that ``report`` and ``after`` read (``publish == "units"``).
    """

    name: str  # the workflow: recorded in _state/job.json, the manifest's `track`
    takes: str  # the kind of data plan_inputs admits: "pretrain" (documents) or "sft" (conversations)
    stages: Callable[[Run], list[Stage]]
    report: Callable[[Run, Results, dict], dict]
    configure: Callable[[Run], Any] = _no_config
    counts: Callable[[Run, Results], Stats] = last_stage_counts
    tokenizer: bool = False
    warm: Callable[..., Callable[[list], Any] | None] | None = None
    pull: Callable[[Run], tuple[str, ...]] = _no_pull
    after: Callable[[Run, dict, Results], Any] | None = None
    describe: Callable[[Run], dict] | None = None  # what a dry run shows beyond the inputs and the config
    # with an s3:// --out: "units" publishes each committed unit (its stages read only their own units),
    # "end" publishes the run whole when it ends (its later stages read the earlier ones' files)
    publish: str = "end"
    progress: Callable[[Run], Callable] | None = None  # the job's own progress lines (default: a bar per stage)
    pack: bool = True  # whether small files may share a unit (False: its units know a record by its line alone)


@dataclass
class Run:
    """One run of a job, as :func:`run` plans it: what every hook of the job reads."""

    job: Job
    inputs: Inputs
    out: Path  # the local directory (an object-storage output's work directory)
    store: Store | None  # the object store published to
    options: JobOptions
    tokenizer: Tokenizer | None
    config: dict
    started: float
    plan: Any = None  # what the job's configure returned
    stage_names: list[str] = field(default_factory=list)
    snapshot: dict = field(default_factory=dict)  # the inputs' snapshot, filled once the output is locked
    manifest: dict = field(default_factory=dict)  # written when the run finishes
    pipeline: dict | None = None  # the command's --config file and its digest, read as the run starts

    @property
    def files(self) -> list:
        return self.inputs.files

    @property
    def loaded_tokenizer(self) -> Tokenizer:
        """The tokenizer of a job that loads one (``Job.tokenizer``)."""
        if self.tokenizer is None:
            raise ConfigError(f"{self.job.name}: this job loads no tokenizer")
        return self.tokenizer

    @property
    def schemas(self) -> dict[str, dict]:
        return self.inputs.schemas

    @property
    def where(self) -> str:
        """Where the outputs go: the bucket URL, or the output directory."""
        return self.store.url if self.store is not None else str(self.out)

    def input_units(self) -> list[Unit]:
        """One engine unit per input work unit (its payload), named after it."""
        return [Unit(w.index, w.name, unit_size(w), w) for w in self.inputs.units]

    def guarded(self, task: Task) -> CheckedTask:
        """``task`` over the input units, checking each unit's input against the run's snapshot before it commits."""
        return CheckedTask(task, self.snapshot)


def unit_size(unit: WorkUnit) -> int:
    """Bytes of input in a work unit for progress and ETA (the whole files when it is not a byte range)."""
    return unit.size


def run(job: Job, inputs: Sequence[str], *, out: Any, options: JobOptions | None = None,
        executor: Executor | None = None, tokenizer: TokenizerSpec | Tokenizer | None = "default",
        schemas: dict[str, dict] | None = None) -> dict:
    """Run ``job`` over ``inputs`` into ``out``; return its manifest (a dry run: its plan). Module docstring."""
    started = time.monotonic()
    options = options or JobOptions()
    executor = None if options.dry_run and executor is None else pick_executor(executor, options.workers)
    with holding(executor):
        on_files = job.warm(executor, inputs, options, tokenizer) if job.warm and executor is not None else None
        planned = plan_inputs(job.takes, inputs, text_mode=options.text_mode, schemas=schemas, exclude=options.exclude,
                              force=options.force, skip_misrouted=options.skip_misrouted, unit_bytes=options.unit_bytes,
                              limit=options.limit, on_files=on_files, pack=job.pack)
        local, store = resolve_out(out, [*map(str, inputs), *(f.path for f in planned.files)])
        tok = _tokenizer(job, tokenizer, planned, options) if job.tokenizer else None
        this = Run(job, planned, Path(local), store, options, tok, _base_config(planned, options), started,
                   pipeline=pipeline_file())
        this.plan = job.configure(this)
        if options.dry_run or executor is None:  # the executor is None only for a dry run
            return dry_run_plan(this)
        fingerprint = job_fingerprint(job.name, planned.files, {**this.config, "options": options.fingerprinted()},
                                      tokenizer=tok)
        with hold_job(this.out, workflow=job.name, overwrite=options.overwrite, store=store,
                      at_end=job.publish == "end"):  # locked to the end
            _execute(this, fingerprint, executor)
    return this.manifest


def _execute(this: Run, fingerprint: str, executor: Executor) -> None:
    """Snapshot the inputs, run the stages, finalize (the output is held)."""
    stages = this.job.stages(this)
    this.stage_names = [s.name for s in stages]
    state = this.out / "_state" / stages[0].key
    this.snapshot.update(snapshot_inputs(this.inputs.files, state_dir=state, fingerprint=fingerprint))
    seconds: dict[str, float] = {}
    bars = False if this.options.no_progress else None  # None: a bar when stderr is a terminal
    progress = this.job.progress(this) if this.job.progress else stage_progress(bars, seconds)
    per_unit = this.job.publish == "units"
    run_workflow(stages, out=this.out, fingerprint=fingerprint, executor=executor, progress=progress,
                 finalize=lambda ctx: _finalize(this, ctx, seconds, executor), locked=True,
                 store=this.store if per_unit else None, pull=this.job.pull(this))
    if this.store is not None and not per_unit:
        publish_run(this.store, this.out, written_now(this.out))


def _finalize(this: Run, ctx: StageContext, seconds: dict[str, float], executor: Executor) -> None:
    """Rejects, the manifest envelope with the job's section, the data card, what the job derives after."""
    results = ctx.results
    n_rejects = merge_rejects(this.out, [u.name for u in this.inputs.units])
    stats = this.job.counts(this, results)
    every = [r for name in this.stage_names for r in results[name]]
    manifest = {
        "tokenmill": __version__, "track": this.job.name, "inputs": this.inputs.manifest_inputs(),
        "config": this.config, "counts": stats.to_dict(), "identity": stats.identity_line(),
        "run": {"seconds": round(time.monotonic() - this.started, 3), "peak_rss": peak_rss_mb(every),
                "units": len(this.inputs.units), "step_seconds": step_seconds(every),
                "stage_seconds": dict(seconds),  # this invocation's: a resumed stage shows its rest
                "engine": getattr(executor, "name", type(executor).__name__)},
        "rejects_file": "rejects.jsonl" if n_rejects else None,
        "skipped_inputs": this.inputs.walk_skipped,  # what the directory walks left out, and why
        **({"pipeline_file": this.pipeline} if this.pipeline else {}),  # what --config held when the run started
    }
    manifest.update(this.job.report(this, results, manifest))
    card = card_data(this.out, manifest)
    if card.get("warnings"):  # what the card warns of is said where the user looks: manifest, stderr
        manifest["warnings"] = card["warnings"]
        for warning in card["warnings"]:
            print(f"warning: {warning}", file=sys.stderr)
    write_manifest(this.out, manifest)
    write_datacard(this.out, manifest, card)
    if this.job.after is not None:
        this.job.after(this, manifest, results)
    this.manifest = manifest


def _base_config(planned: Inputs, options: JobOptions) -> dict:
    """The config entries of every job: the work unit size, how plain text is read, what was left out."""
    config = {"unit_bytes": auto_unit_bytes(planned.files) if options.unit_bytes is None else options.unit_bytes,
              "text_mode": options.text_mode, **planned.selection()}
    if options.limit:
        config["limit"] = options.limit
    return config


def _tokenizer(job: Job, spec: TokenizerSpec | Tokenizer | None, planned: Inputs, options: JobOptions) -> Tokenizer:
    """The run's tokenizer: ``spec`` loaded (in a short-lived child process unless the run has one worker:
    then this process encodes, and keeps the encoders it loads); documents' runs check the fast encoder
    against the reference on a few of their own documents."""
    if isinstance(spec, Tokenizer):  # already loaded; a tokenizers.Tokenizer object is a spec to load
        return spec
    if spec is None:
        raise TokenizerError(f"`tokenmill {job.name}` writes tokens and was given no tokenizer; pass one (a name, a "
                             "directory, a file, or \"default\")")
    sample = parity_texts(planned.files, planned.schemas, text_mode=options.text_mode) if job.takes == "pretrain" else None
    return load_tokenizer_isolated(spec, parity_sample=sample, isolate=_pool_size(options.workers, planned.units) > 1)


def _pool_size(workers: int | None, units: list) -> int:
    """The worker processes a run will start (the local executor's rule: no more than units)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(workers or cores, max(1, len(units)))


def parity_texts(files: list, schemas: dict[str, dict], *, text_mode: str, per_file: int = 4,
                 max_chars: int = 4_000, budget: int = 200_000) -> list[str]:
    """A few real documents of the inputs, for the fast tokenizer's start-up parity check.

    Bounded (``budget`` characters in all): the reference encoder checks them at a few MB/s.
    """
    texts: list[str] = []
    for f in files:
        key = (schemas.get(f.rel) or {}).get("text") or "text"
        rows = sample_records(f, n=per_file, text_mode=text_mode)[0]
        for r in rows:
            if isinstance(r.get(key), str) and budget > 0:
                texts.append(r[key][:min(max_chars, budget)])
                budget -= len(texts[-1])
        if budget <= 0:
            break
    return texts


def dry_run_plan(this: Run) -> dict:
    """What the run would do, without doing it: each input with its route, size and units, the config, the
    tokenizer, and what the job adds (``describe``)."""
    plan = input_plan(this.job.name, this.inputs, this.where, this.config)
    if this.tokenizer is not None:
        plan["tokenizer"] = this.tokenizer.info()
    if this.job.describe is not None:
        plan.update(this.job.describe(this))
    return plan
