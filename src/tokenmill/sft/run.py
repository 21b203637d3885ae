"""``tokenmill sft``: route, normalise, validate, render with the chat template, mask, write shards.

Per work unit (in a worker process): raw batches -> canonical ``Conversation`` dicts (rejects on the way)
-> strict validation -> one render + one tokenization with the loss mask (turn-aware truncation past
``max_length``) -> ``ShardWriter`` with the mask. The first ``verify`` examples of every unit, and the first of
every shape it holds (see :mod:`tokenmill.sft.parity`), are checked against ``transformers``'
``apply_chat_template``; a real difference stops the run naming the example, or with ``on_mismatch="reject"``
rejects it as ``parity_mismatch``.

Curation steps (``steps=``: document steps, and plain callables through :func:`tokenmill.steps.plain.as_doc_step`)
run on each batch of valid conversations before rendering, over the flat view of
:func:`tokenmill.sft.steps.conversation_batch` (``text``, ``prompt``, ``response``); the conversations they
remove are counted as filtered, by reason, and every conversation's verdict goes into the run's decision ledger
(``ledger/<unit>.parquet``), as on the pretraining track.
Corpus steps (exact and near-duplicate removal) run as stages before the shards stage: see
:mod:`tokenmill.sft.corpus`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tokenmill._arrow import skip_pandas_probe
from tokenmill.base.accounting import Reject, Stats
from tokenmill.curate.workflows.track import funnel_section
from tokenmill.engine.outputs import Shards
from tokenmill.engine.stage import Stage, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError, ParityError, TemplateError
from tokenmill.io import read_unit
from tokenmill.job.options import JobOptions
from tokenmill.job.run import Job, Results, Run
from tokenmill.job.run import run as run_job
from tokenmill.pack import best_fit_decreasing
from tokenmill.report.rejects import RejectSink
from tokenmill.selection import count_sources, file_counts
from tokenmill.sft import verdicts
from tokenmill.sft.corpus import (
    DOCS_STAGE,
    conversations_table,
    curation_report,
    identity,
    split_steps,
    survivors,
    workflow_stages,
    write_docs,
)
from tokenmill.sft.failclosed import CHECKS as UNSAFE_CHECKS
from tokenmill.sft.failclosed import unsafe_example
from tokenmill.sft.lacks import TOOLS_NOT_RENDERED, missing_tool_support, tools_not_rendered
from tokenmill.sft.normalize import normalize_rows
from tokenmill.sft.options import SftOptions
from tokenmill.sft.oracle import hf_oracle, reference
from tokenmill.sft.oracle import unavailable as no_oracle
from tokenmill.sft.parity import VerifyPlan, check_mask, check_parity, example_shape, tool_arguments_decoded
from tokenmill.sft.preflight import preflight
from tokenmill.sft.render import check_stop_token
from tokenmill.sft.report import SftReport, summarize, task_of
from tokenmill.sft.steps import conversation_batch, filter_conversations
from tokenmill.sft.template import ChatTemplate, load_template
from tokenmill.sft.truncate import fit_conversations
from tokenmill.sft.verdicts import run_key, trusted
from tokenmill.shards import ShardWriter, open_shards
from tokenmill.split import SplitWriters, ValSplit, make_split
from tokenmill.steps.cascade import Cascade
from tokenmill.steps.contract import step_packages
from tokenmill.steps.ledger import UnitLedger
from tokenmill.steps.plain import as_doc_step
from tokenmill.track import shards_report, staged_files, token_warm, track_stages

if TYPE_CHECKING:
    from tokenmill.base.inputs import WorkUnit
    from tokenmill.engine.workflow import Executor
    from tokenmill.sft.corpus import Survivors
    from tokenmill.steps.contract import AnyStep, Step
    from tokenmill.tokenize.sources import TokenizerSpec
    from tokenmill.tokenize.tokenizer import Tokenizer

STAGE = "sft"  # the stage whose task runs the document steps: its ledger parts are steps/sft/ledger/<unit>.parquet


@dataclass(frozen=True)
class SftTask:
    """Everything one worker needs to turn one unit of conversations into masked shards. Picklable."""

    output: ClassVar[type] = Shards  # what its units hand on, checked at commit (engine/outputs.py)

    tokenizer: Tokenizer
    template: ChatTemplate
    schemas: dict[str, dict]
    options: SftOptions
    shard_tokens: int = 1 << 28
    batch_rows: int = 1024
    steps: Sequence[Step] = field(default_factory=tuple)  # document steps (plain callables wrapped)
    limit: int | None = None  # first records of every input only (a trial run)
    split: ValSplit | None = None  # validation split by conversation (tokenmill.split)
    survivors: Survivors | None = None  # what the corpus steps kept, when there are any
    verdict_key: str | None = None  # sft/verdicts.py run_key: where this run's checks are cached (None: nowhere)
    trusted: frozenset = frozenset()  # the shapes cached verdicts vouched for when the run started

    def __post_init__(self) -> None:
        if self.template.date != self.options.date:  # the run's fixed day, for a template that stamps the time
            object.__setattr__(self, "template", dataclasses.replace(self.template, date=self.options.date))

    def setup(self) -> None:
        """Once per worker, before its first unit: the steps' own ``setup()``."""
        self.cascade.setup()

    @property
    def cascade(self) -> Cascade:
        """The document steps as one cascade; steps may only filter here (``rewrite=False``)."""
        return Cascade(tuple(self.steps), rewrite=False)

    def ledger(self, staging: Path, unit: Unit) -> UnitLedger | None:
        """The unit's ledger of the document steps (None without steps)."""
        return UnitLedger(self.cascade, staging, STAGE, unit.name) if self.steps else None

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:

        skip_pandas_probe()  # a pool worker never needs pyarrow to import pandas
        work = unit.payload
        stats, report, seconds = Stats(), SftReport(), Counter()
        unavailable = no_oracle(self.tokenizer) if self.options.verify else ""
        checking = bool(self.options.verify) and not unavailable
        plan = VerifyPlan(self.options.verify, trusted=self.trusted)
        info = self.tokenizer.info(chat_template=self.template.source)
        out = SplitWriters(self.split, staging, lambda where: ShardWriter(
            where, stem_prefix=f"shard-{work.index:06d}", with_mask=True, tokenizer_info=info,
            max_tokens=self.shard_tokens))
        sink = RejectSink(staging, work)
        curated = self.survivors.of_unit(work.index) if self.survivors is not None else None
        ledger = self.ledger(staging, unit)
        sources = file_counts(work)  # a unit of packed files: the manifest's counts of each
        for source, convs, locs in self.conversations(work, stats=stats, ledger=ledger, sink=sink, sources=sources):
            if curated is not None:
                convs, locs = _surviving(convs, locs, curated, stats, ledger)
            kept: dict[int, tuple[Any, list]] = {}  # writer -> its examples of this batch, in order
            for conv, loc, rendered in zip(convs, locs, self._render(convs)):
                if not isinstance(rendered, TemplateError):
                    rendered = self._safe(self._tools_shown(conv, rendered, report))
                if isinstance(rendered, TemplateError):
                    reason = getattr(rendered, "reason", "template_error")
                    sink.add([Reject(source, loc, reason, str(rendered), raw=conv)], stats)
                    _count(report.template_lacks, _lacks(self.template, conv, reason))
                    _count(report.unsafe, reason if reason in UNSAFE_CHECKS else "")
                    _rejected(ledger, loc)
                    continue
                mismatch = self._verify(conv, rendered, plan, report) if checking and plan.wants(conv, rendered) else ""
                if mismatch:
                    sink.add([Reject(source, loc, "parity_mismatch", mismatch, raw=conv)], stats)
                    _rejected(ledger, loc)
                    continue
                stats.kept += 1
                writer = out.pick(conv, rendered.id, source)  # None: ranking pass of a --val-count split
                if writer is None:
                    continue
                kept.setdefault(id(writer), (writer, []))[1].append(rendered)
                stats.tokens += len(rendered.ids)
                out.count(writer, 1, len(rendered.ids))
                report.add_example(rendered.stats)
                if conv.get("meta") and '"task"' in conv["meta"]:  # labelled by `sft select`: the card's mix
                    _count(report.task_mix, task_of(conv["meta"]))
            for writer, examples in kept.values():
                write_rendered(writer, examples, source=source)
        report.parity["shapes_present"] = plan.present
        if checking:
            report.parity["skipped_cached"] = plan.skipped
        if checking and self.verdict_key and not report.parity["real_differences"]:
            verdicts.record(self.verdict_key, plan.passed.items())
        sink.close()
        data = {**out.close(), "report": report.to_dict(), "parity_unavailable": unavailable}  # closed first: final names
        if ledger is not None:
            data["ledger"] = ledger.close()
            seconds.update(ledger.seconds)
        if work.packed:
            data["sources"] = sources
        return UnitResult(stats=stats, outputs=staged_files(staging), step_seconds=seconds, data=data)

    def conversations(self, work: WorkUnit, *, stats: Stats, ledger: UnitLedger | None, sink: RejectSink | None = None,
                      sources: dict | None = None):
        """``(source, conversations, locs)`` of every batch of one unit: read, normalised and validated, the
        document steps applied (through ``ledger``). Unreadable and invalid records go to ``sink`` (when given);
        ``sources`` gets each file's counts (:func:`~tokenmill.selection.count_sources`)."""
        batches = read_unit(work, batch_rows=self.batch_rows, limit=self.limit)
        for raw in batches if sources is None else count_sources(batches, stats, sources):
            stats.input += len(raw) + len(raw.rejects)
            stats.bytes_in += raw.nbytes
            convs, rejects = normalize_rows(raw.to_rows(), raw.locs, source=raw.source, schema=self.schemas.get(raw.source, {}),
                                            allow_consecutive=self.options.allow_consecutive)
            if sink is not None:
                sink.add(raw.rejects, stats)
                sink.add(rejects, stats)
            bad = {r.loc for r in rejects}
            locs = [loc for loc in raw.locs if loc not in bad]
            if ledger is not None:
                convs, locs = filter_conversations(ledger, convs, locs, stats=stats)
            yield raw.source, convs, locs

    def _render(self, convs: list[dict]) -> list:
        """Rendered examples, or the TemplateError of each conversation that cannot be rendered."""
        return fit_conversations(
            convs, max_length=self.options.max_length or 1 << 40, tokenizer=self.tokenizer,
            template=self.template, policy=self.options.policy,
        )

    def _safe(self, rendered: Any) -> Any:
        """``rendered``, or the fail-closed check it fails (sft/failclosed.py): raised (``on_unsafe="stop"``) or
        returned to be rejected (``"reject"``)."""
        if isinstance(rendered, TemplateError):
            return rendered
        problem = unsafe_example(rendered, self.tokenizer, check_stop=not self.options.allow_untrained_stop)
        if problem is None:
            return rendered
        if self.options.on_unsafe == "reject":
            return problem
        raise TemplateError(f"{problem} ({problem.reason}); --on-unsafe reject (sft.on_unsafe: reject) rejects "
                            "such examples and counts them instead of stopping", reason=problem.reason)

    def _tools_shown(self, conv: dict, rendered: Any, report: SftReport) -> Any:
        """``rendered``, or its ``tools_not_rendered`` reject when the template rendered away the tools ``conv``
        uses; with ``keep_unrendered_tools`` the example is kept and counted in the report."""
        if not self.options.keep_unrendered_tools:
            return tools_not_rendered(self.template.source, conv) or rendered
        _count(report.tools_not_rendered_kept, missing_tool_support(self.template.source, conv))
        return rendered

    def _verify(self, conv: dict, rendered: Any, plan: VerifyPlan, report: SftReport) -> str:
        """Check one example (the reference is built on the first check of the process); the difference when it
        differs and is to be rejected, else ""."""

        parity = report.parity
        oracle, _ = _oracle(self.tokenizer)
        if oracle is None:
            return ""
        try:
            note = check_parity(conv, rendered, oracle, self.template)
            if not note:
                parity["mask_turns_checked"] += check_mask(conv, rendered, oracle, self.template, self.options.policy)
        except ParityError as exc:
            if self.options.on_mismatch != "reject":
                raise
            parity["real_differences"] += 1
            return str(exc)
        parity["exempt" if note else "checked"] += 1
        parity["deliberate"]["literal_control_strings"] += int(bool(note))
        parity["deliberate"]["tool_arguments_decoded"] += int(tool_arguments_decoded(conv))
        shape = example_shape(conv, rendered)
        for flag in shape:
            parity["shapes_checked"][flag] += 1
        plan.passed[shape] += 1
        return ""


def _lacks(template: ChatTemplate, conv: dict, reason: str) -> str:
    """What tool feature the template lacks, for a record rejected because it never names its tools ("" else)."""
    return missing_tool_support(template.source, conv) if reason in ("template_error", TOOLS_NOT_RENDERED) else ""


def _count(tally: dict[str, int], label: str) -> None:
    """One more of ``label`` in a report's tally (nothing for "")."""
    if label:
        tally[label] = tally.get(label, 0) + 1


def _surviving(convs: list[dict], locs: list[int], curated: tuple[set[str], dict[str, str]], stats: Stats,
               ledger: UnitLedger | None) -> tuple[list[dict], list[int]]:
    """The conversations the corpus steps kept; the others counted as filtered by the step that removed them
    (and recorded so in ``ledger``)."""
    kept_ids, why = curated
    out_convs, out_locs = [], []
    for conv, loc in zip(convs, locs):
        if str(loc) in kept_ids:
            out_convs.append(conv)
            out_locs.append(loc)
        else:
            reason = why.get(str(loc), "curation:removed")
            stats.filter(reason)
            if ledger is not None:
                ledger.removed(loc, reason)
    return out_convs, out_locs


def _rejected(ledger: UnitLedger | None, loc: int) -> None:
    if ledger is not None:
        ledger.rejected(loc)


@dataclass(frozen=True)
class ConversationsTask:
    """The first stage of a curated run: one unit's conversations, as flat views for the corpus steps."""

    task: SftTask

    def setup(self) -> None:
        self.task.setup()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        import pyarrow as pa


        skip_pandas_probe()
        stats, batches = Stats(), []
        ledger = self.task.ledger(staging, unit)  # the steps' verdicts; the shards stage writes the ledger part
        for _, convs, locs in self.task.conversations(unit.payload, stats=stats, ledger=ledger):
            if convs:
                batch = conversation_batch(convs)
                ids = pa.array([str(loc) for loc in locs], pa.string())  # unique in the unit, unlike record ids
                batches.append(batch.set_column(0, batch.schema.field(0), ids))
        result = write_docs(staging, DOCS_STAGE, unit.name, conversations_table(batches))
        result.step_seconds = ledger.seconds if ledger is not None else Counter()
        return result


def write_rendered(writer: ShardWriter, examples: list, *, source: str) -> None:
    """The examples of one batch in order, one ``add_many`` per run of examples with (or without) loss weights:
    the same bytes as one ``add`` each, for a fraction of the per-call cost."""
    start = 0
    while start < len(examples):
        weighted = examples[start].weights is not None
        stop = start + 1
        while stop < len(examples) and (examples[stop].weights is not None) == weighted:
            stop += 1
        run = examples[start:stop]
        offsets = np.zeros(len(run) + 1, dtype=np.int64)
        np.cumsum([len(r.ids) for r in run], out=offsets[1:])
        writer.add_many(np.concatenate([r.ids for r in run]), offsets, rec_ids=[r.id for r in run],
                        sources=[source] * len(run), flat_mask=np.concatenate([r.mask for r in run]),
                        flat_weights=np.concatenate([r.weights for r in run]) if weighted else None)
        start = stop


_ORACLES: dict[tuple, Any] = {}


def oracle_key(tokenizer: Tokenizer) -> tuple:
    """What a reference is built from: the vocabulary (its fingerprint) and the special tokens it is given."""
    return (tokenizer.fingerprint, tokenizer.bos_token, tokenizer.eos_token)


def _oracle(tokenizer: Tokenizer) -> tuple[Any, str]:
    """(transformers reference, "") for this tokenizer, built once per process; (None, why) when not possible.
    Keyed by the vocabulary's fingerprint and the special tokens the reference is built with: two tokenizers of
    one vocabulary may name other BOS/EOS tokens, and the reference of one would check the other wrongly."""
    key = oracle_key(tokenizer)
    if key not in _ORACLES:

        _ORACLES[key] = hf_oracle(tokenizer)
    return _ORACLES[key]


def _report(results: list[UnitResult], out: Path, *, seq_len: int | None, reference: str | None) -> dict:
    """The merged report of all units (naming the parity reference, and why parity was not checked when no
    reference could be built), with the packing plan at ``seq_len`` when asked for."""
    report = summarize(SftReport.from_dict(r.data["report"]) for r in results)
    if reference:
        report.setdefault("parity", {})["reference"] = reference
    why = next((r.data["parity_unavailable"] for r in results if r.data.get("parity_unavailable")), "")
    if why:
        report.setdefault("parity", {})["unavailable"] = why
    if seq_len:
        report["packing"] = _packing(out, seq_len)
    return report


def resolve_template(spec: str | None, tokenizer: Tokenizer) -> ChatTemplate:
    """An explicit template, else the tokenizer's own, else the built-in ChatML."""
    if spec:
        return load_template(spec)
    return load_template(tokenizer if getattr(tokenizer, "chat_template", None) else None)


def run_sft(
    inputs: Sequence[str],
    *,
    out: str | Path,
    tokenizer: TokenizerSpec | Tokenizer = "default",
    chat_template: str | None = None,
    workers: int | None = None,
    executor: Executor | None = None,
    steps: Sequence[AnyStep] = (),
    force: bool = False,
    overwrite: bool = False,
    unit_bytes: int | None = None,
    shard_tokens: int = 1 << 28,
    seq_len: int | None = None,
    progress: bool | None = None,
    schemas: dict[str, dict] | None = None,
    exclude: Sequence[str] = (),
    skip_misrouted: bool = False,
    limit: int | None = None,
    dry_run: bool = False,
    val_fraction: float | None = None,
    val_count: int | None = None,
    val_seed: int = 0,
    **options: Any,
) -> dict:
    """Run the SFT track end to end; return the manifest (also written to ``out/manifest.json``).

    ``executor`` runs the units (default: a local pool of ``workers`` processes, all cores when None).
    ``exclude``, ``skip_misrouted``, ``limit`` and ``dry_run``: see :mod:`tokenmill.selection`; a dry run
    returns the plan and writes nothing. ``val_fraction`` or ``val_count`` (with ``val_seed``) split whole
    conversations off into ``out/val/``: see :mod:`tokenmill.split`. ``options``: the fields of
    :class:`SftOptions`. The run itself is :func:`tokenmill.job.run` of :func:`sft_job`.
    """
    opts = SftOptions(chat_template=chat_template, seq_len=seq_len, **options)
    job = sft_job(opts, chat_template=chat_template, steps=steps, shard_tokens=shard_tokens,
                  seq_len=seq_len, split=make_split(val_fraction=val_fraction, val_count=val_count, val_seed=val_seed))
    run_options = JobOptions(workers=workers, force=force, overwrite=overwrite, unit_bytes=unit_bytes,
                             exclude=tuple(exclude), skip_misrouted=skip_misrouted, limit=limit, dry_run=dry_run,
                             no_progress=progress is False)
    return run_job(job, inputs, out=out, options=run_options, executor=executor, tokenizer=tokenizer, schemas=schemas)


def sft_job(opts: SftOptions, *, chat_template: str | None = None, steps: Sequence[AnyStep] = (),
            shard_tokens: int = 1 << 28, seq_len: int | None = None, split: ValSplit | None = None) -> Job:
    """The ``sft`` job: conversations in, masked token shards out (the ``shards`` stage, after the corpus steps'
    stages or a ``--val-count`` ranking stage). Refuses, before any work, what cannot run together."""
    inline, corpus = split_steps(steps)  # sft/corpus.py: document steps, corpus steps (dedup)
    inline = tuple(as_doc_step(s) for s in inline)  # one cascade: every step's removals reach the ledger
    if split and split.count is not None and corpus:
        raise ConfigError("--val-count cannot be combined with corpus-wide steps (dedup) on the SFT track yet: "
                          "use --val-fraction, or curate first and split the curated run")
    opts.policy  # noqa: B018 -- validates the masking options before any work starts
    curation: dict = {}
    references: list[str | None] = []  # what the run's parity checks are made against (sft/oracle.py)

    def configure(run: Run) -> SftTask:
        template = resolve_template(chat_template, run.loaded_tokenizer)
        preflight(template, run, policy=opts.policy, allow_consecutive=opts.allow_consecutive,  # sft/preflight.py
                  keep_unrendered_tools=opts.keep_unrendered_tools)
        check_stop_token(template, run.loaded_tokenizer, allow=opts.allow_untrained_stop)
        run.config.update({"sft": opts.fingerprinted(), "chat_template": template.origin,
                           "chat_template_hash": template.digest, "shard_tokens": shard_tokens})
        if steps:
            run.config.update({"steps": [identity(s) for s in steps], **step_packages(steps)})
        if split:
            run.config["val_split"] = split.describe()
        checked_against = reference() if opts.verify and not run.options.dry_run else None  # transformers, else plain
        key = run_key(run.loaded_tokenizer, template, opts, reference=checked_against) if checked_against else None
        references.append(checked_against)
        return SftTask(run.loaded_tokenizer, template, run.inputs.schemas, opts, shard_tokens=shard_tokens, steps=inline,
                       limit=run.options.limit, split=split, verdict_key=key, trusted=trusted(key) if key else frozenset())

    def stages(run: Run) -> list:
        return track_stages(run, run.plan, **(_curated(run, run.plan, corpus, curation) if corpus else {}))

    def report(run: Run, results: Results, manifest: dict) -> dict:
        def summarize(last: list[UnitResult], out: Path) -> dict:
            merged = _report(last, out, seq_len=seq_len, reference=references[-1])
            return {**merged, "curation": curation} if corpus else merged

        section = shards_report(run, results, manifest, chat_template=run.plan.template.source, summarize=summarize)
        if inline:
            units = [u.name for u in run.inputs.units]
            section.update(funnel_section(run.out, {**manifest, **section}, inline, units, stage=STAGE))
        return section

    return Job("sft", "sft", stages, report, configure=configure, tokenizer=True, warm=token_warm("sft"),
               pull=lambda run: ("",) if seq_len else ("steps/",) if inline else (),  # packing: every shard; funnel: parts
               describe=lambda run: {"chat_template": run.plan.template.origin}, publish="units",
               pack=not steps)  # the steps' ledger and the corpus steps' survivors know a record by its line


def _curated(run: Run, task: SftTask, corpus: tuple, curation: dict) -> dict:
    """``before`` and ``bind`` of :func:`~tokenmill.track.track_stages` for a run with corpus steps (sft/corpus.py)."""
    import dataclasses


    def before(guard):
        first = Stage(DOCS_STAGE, 1, lambda ctx: StagePlan(run.input_units(), guard(ConversationsTask(task))))
        return [first, *workflow_stages(corpus)]

    def bind(ctx, guard):
        curation.update(curation_report(ctx, corpus))
        return guard(dataclasses.replace(task, survivors=survivors(ctx, corpus)))

    return {"before": before, "bind": bind}


def _packing(out: Path, seq_len: int) -> dict:
    """The best-fit-decreasing plan of the written examples at ``seq_len``."""

    plan = best_fit_decreasing(open_shards(out, allow_partial=True).lengths, seq_len)  # before the manifest
    return {"seq_len": seq_len, "n_packs": int(plan.n_packs), "efficiency": round(float(plan.efficiency), 6),
            "dropped_over_length": int(plan.dropped), "empty": int(plan.empty)}
