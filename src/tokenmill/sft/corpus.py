"""Corpus-wide curation on the SFT track: exact and near-duplicate removal of conversations, before rendering.

``steps:`` of ``tokenmill sft`` may hold corpus steps (``exact_dedup``, ``minhash_dedup``) next to document
steps (``decontaminate``, ``length``, ``sft_quality``, ...). Each takes ``on:``, the view of a conversation it
looks at: ``conversation`` (every message's content, the default), ``prompt`` (the user turns) or ``response``
(the assistant turns); a document step's ``on:`` sets its ``column``.

With corpus steps the run is a workflow of stages (1 or N workers, kill and resume: the same bytes):

1. ``sft_conversations`` (one unit per input work unit): read, normalise, the document steps; the flat view of
   every surviving conversation (:func:`tokenmill.sft.steps.conversation_batch`) goes to a Parquet file, its
   ``id`` the record's line or row in its input (unique within the unit).
2. per corpus step, ``sft_view.<step>`` (same units) puts the step's view in ``text``, then the step's own
   stages run (:mod:`tokenmill.curate.dedup`) and end in a documents stage of the survivors.
3. ``shards``: every unit reads its raw records again, and writes only the conversations that survived every
   step; each removed one is counted as filtered with the reason of the step that removed it
   (``exact_dedup_prompt_v1:duplicate``). The manifest's ``report.curation`` holds each step's counts.

Corpus steps are named after their view (``exact_dedup_prompt``, ``minhash_dedup_conversation``), so the same
step on two views runs twice, in stages of its own. Document steps run before the corpus steps (in stage 1
and again in stage 3, where they give the same verdicts); a conversation that survives dedup and then fails
to render is rejected like any other, and its removed duplicates stay removed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.base import segments
from tokenmill.base.accounting import Stats
from tokenmill.engine.outputs import Documents, as_data, output, outputs
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.sft.steps import CONVERSATION_VIEW
from tokenmill.steps.build import build_step, build_steps
from tokenmill.steps.contract import AnyStep, CorpusStep, Step, is_corpus_step, step_identity

VIEWS = {"conversation": "text", "prompt": "prompt", "response": "response"}
DOCS_STAGE = "sft_conversations"


def build_sft_steps(specs: list[dict] | None, *, source: str = "config") -> list[Step]:
    """Steps from an SFT ``steps:`` list: the one builder, ``on:`` taken as above; problems all at once."""
    return build_steps(specs, source=source, build=build_on_view)


def build_on_view(spec: dict | Step, *, where: str) -> Step:
    """One step of an SFT ``steps:`` list: its ``on:`` sets a document step's column or a corpus step's view."""
    if isinstance(spec, dict) and True in spec and "on" not in spec:  # YAML 1.1 reads the key `on` as true
        spec = {("on" if k is True else k): v for k, v in spec.items()}
    if not isinstance(spec, dict) or "on" not in spec:
        step = build_step(spec, where=where)
        return OnView(step, "conversation") if is_corpus_step(step) else step
    on = spec["on"]
    if on not in VIEWS:
        raise ConfigError(f"{where}.on: {on!r} is not one of {', '.join(VIEWS)}")
    rest = {k: v for k, v in spec.items() if k != "on"}
    step: Step = build_step(rest, where=where)
    if is_corpus_step(step):
        return OnView(step, on)
    if not dataclasses.is_dataclass(step) or isinstance(step, type) or "column" not in {
            f.name for f in dataclasses.fields(step)}:
        raise ConfigError(f"{where}.on: step {spec.get('name')!r} reads no chosen column; remove on:")
    return dataclasses.replace(step, column=VIEWS[on])


def _suffixed(step: CorpusStep, on: str) -> CorpusStep:
    """``step`` named ``<name>_<on>`` when its name is its dataclass default (a name of its own stays)."""
    name = step.name
    if not dataclasses.is_dataclass(step) or isinstance(step, type):
        return step
    default = next((f.default for f in dataclasses.fields(step) if f.name == "name"), None)
    return dataclasses.replace(step, name=f"{name}_{on}") if default == name else step


class OnView:
    """A corpus step over one view of every conversation, its name suffixed with the view (unless it was
    given a name of its own)."""

    def __init__(self, step: CorpusStep, on: str):
        if on not in VIEWS:
            raise ConfigError(f"on={on!r} is not one of {', '.join(VIEWS)}")
        step = _suffixed(step, on)
        self.step, self.on = step, on
        self.name, self.version = step.name, step.version

    def identity(self) -> dict:
        return {**step_identity(self.step), "on": self.on}

    def stages(self, upstream: str) -> list[Stage]:
        view = f"sft_view.{self.name}"
        column = VIEWS[self.on]
        return [Stage(view, 1, lambda ctx: _plan_view(upstream, column, view, ctx)), *self.step.stages(view)]


def split_steps(steps: Sequence[AnyStep]) -> tuple[tuple[AnyStep, ...], tuple[OnView, ...]]:
    """(document and plain steps, corpus steps), each in order; a bare corpus step is taken on conversations."""
    inline = tuple(s for s in steps if not is_corpus_step(s))
    corpus = tuple(s if isinstance(s, OnView) else OnView(s, "conversation") for s in steps if is_corpus_step(s))
    names = [s.name for s in corpus]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"steps: {', '.join(twice)} listed twice on the same view; give one a name: of its own")
    return inline, corpus


def identity(step: AnyStep) -> dict:
    return step.identity() if isinstance(step, OnView) else step_identity(step)


def _plan_view(upstream: str, column: str, view: str, ctx: StageContext) -> StagePlan:
    from tokenmill.curate.dedup import common as cm  # corpus steps only: a run without one never imports dedup

    return StagePlan(cm.units_of(cm.upstream_parts(ctx, upstream)), ViewTask(str(ctx.out), column, view),
                     {"column": column})


@dataclass(frozen=True)
class ViewTask:
    """Copy one unit of the upstream conversations with ``text`` set to ``column``."""
    output: ClassVar[type] = Documents  # what its units hand on, checked at commit (engine/outputs.py)

    out: str
    column: str
    stage: str

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        from tokenmill.curate.dedup import common as cm

        part: cm.DocsPart = unit.payload
        table = cm.read_docs(Path(self.out), part)
        table = table.set_column(table.column_names.index("text"), "text", table.column(self.column))
        return write_docs(staging, self.stage, part.name, table)


def write_docs(staging: Path, stage: str, unit_name: str, table: pa.Table) -> UnitResult:
    """One documents-stage unit: ``steps/<stage>/docs/<unit>.parquet`` (no ledger of its own)."""
    rel = f"steps/{stage}/docs/{unit_name}.parquet"
    (staging / rel).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, staging / rel)
    return UnitResult(stats=Stats(input=table.num_rows, kept=table.num_rows), outputs=[rel],
                      data=as_data(Documents(rel, unit=unit_name, rows=table.num_rows,
                                             size=(staging / rel).stat().st_size)))


def conversations_table(batches: list[pa.RecordBatch]) -> pa.Table:
    """The flat views of one unit, with ``conversation`` kept beside ``text`` (a view stage may replace it)."""
    table = pa.Table.from_batches(batches, schema=CONVERSATION_VIEW)
    return table.append_column("conversation", table.column("text"))


def workflow_stages(corpus: Sequence[OnView]) -> list[Stage]:
    """The stages of every corpus step, each reading the documents stage before it."""
    stages, upstream = [], DOCS_STAGE
    for step in corpus:
        more = step.stages(upstream)
        stages += more
        upstream = more[-1].name
    return stages


@dataclass(frozen=True)
class Survivors:
    """What the shards stage needs of the corpus steps, per unit index: the surviving docs file and each
    step's ledger file (relative to ``out``)."""

    out: str
    docs: dict[int, str]
    ledgers: dict[int, tuple[str, ...]]

    def of_unit(self, index: int) -> tuple[set[str], dict[str, str]]:
        """(ids kept, id -> reason of the first step that removed it) of one unit."""
        kept = set(pq.read_table(segments.arrow_source(Path(self.out) / self.docs[index]), columns=["id"])
                   .column("id").to_pylist())
        why: dict[str, str] = {}
        for rel in self.ledgers.get(index, ()):
            ledger = pq.read_table(segments.arrow_source(Path(self.out) / rel), columns=["id", "reason"]).to_pydict()
            for i, r in zip(ledger["id"], ledger["reason"]):
                if r is not None:
                    why.setdefault(i, r)
        return kept, why


def survivors(ctx: StageContext, corpus: Sequence[OnView]) -> Survivors:
    last = workflow_stages(corpus)[-1].name if corpus else DOCS_STAGE
    docs = {i: r.docs for i, r in enumerate(outputs(ctx.results[last], Documents, stage=last))}
    ledgers = {i: tuple(ledger for s in corpus
                        if (ledger := output(ctx.results[s.name][i], Documents, stage=s.name, index=i).ledger) is not None)
               for i in range(len(ctx.results[last]))}
    return Survivors(str(ctx.out), docs, ledgers)


def curation_report(ctx: StageContext, corpus: Sequence[OnView]) -> dict:
    """Per corpus step: the conversations it saw and kept, and what it removed by reason."""
    out = {}
    for step in corpus:
        total = Stats()
        for r in ctx.results[step.name]:
            total = total + r.stats
        out[step.name] = {"on": step.on, "input": total.input, "kept": total.kept, "removed": dict(total.filtered)}
    return out
