"""``tokenmill quality train`` as a job of the one driver (:func:`tokenmill.job.run`): the same job flags,
``--dry-run``, ``--limit``, resume after a kill, one manifest envelope and a data card as every other command.

Two stages:

1. ``quality_read``, one unit per input work unit: its records read (``--limit``: the first N of each input
   file), each usable text written with its class to ``_work/quality_read/<unit>.parquet``, every unusable
   record to the unit's rejects (file, line, reason), the columns seen kept for the check of step 2;
2. ``quality_fit``, one unit: the parts in input order, positives and negatives exactly as the command read
   them before it was a job (so the same inputs and seed give the same model bytes), then
   :func:`~tokenmill.curate.quality.classifier.train_quality` writes ``model.bin`` and ``model.bin.card.json``.

The output is a directory (``--out DIR``): the model, its card, ``manifest.json``, ``datacard.md``,
``rejects.jsonl``. The quality step takes the directory or the model file (``model: DIR``).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.base.accounting import Reject, Stats
from tokenmill.curate.quality.classifier import CARD_SUFFIX, DEFAULTS, check_params, train_quality
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.io import expand_inputs, read_unit
from tokenmill.job.inputs import ANY
from tokenmill.job.run import Job, Results, Run
from tokenmill.report.rejects import RejectSink

READ_STAGE, FIT_STAGE = "quality_read", "quality_fit"
MODEL_FILE = "model.bin"
PART = pa.schema([("text", pa.large_string()), ("label", pa.bool_())])


TRUE_LABELS = {"1", "true", "yes", "hq", "high", "positive", "pos"}
FALSE_LABELS = {"0", "false", "no", "lq", "low", "negative", "neg"}


def row_problem(row: dict, text_field: str, label_field: str | None) -> tuple[str, str] | None:
    """Why a record cannot be a training example (its reason and message), or None."""
    text = row.get(text_field)
    if text is None:
        return "missing_field", f"no {text_field!r} field"
    if not isinstance(text, str):
        return "wrong_type", f"field {text_field!r} is {type(text).__name__}, expected a string"
    if not text.strip():
        return "empty_text", f"field {text_field!r} is empty"
    if label_field and to_label(row.get(label_field)) is None:
        return "bad_label", (f"label {row.get(label_field)!r} in {label_field!r} is not one of 1/0, true/false "
                             f"({', '.join(sorted(TRUE_LABELS | FALSE_LABELS))})")
    return None


def check_columns(paths: Sequence[str], columns: set[str], wanted: dict[str, str | None]) -> None:
    """A column no record holds is named (with the columns there are), not reported as "0 examples"."""
    missing = [f"{flag} {name!r}" for flag, name in wanted.items() if name and columns and name not in columns]
    if missing:
        raise ConfigError(f"quality train: no record of {', '.join(paths)} has the column(s) {', '.join(missing)}; "
                          f"the columns are: {', '.join(sorted(columns))}")


def to_label(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    s = str(value).strip().lower() if value is not None else ""
    return True if s in TRUE_LABELS else False if s in FALSE_LABELS else None


@dataclass(frozen=True)
class Labels:
    """Where the classes come from: ``--positive``/``--negative`` files, or one ``--labelled`` set's column."""

    positive: tuple[str, ...] = ()
    negative: tuple[str, ...] = ()
    labelled: tuple[str, ...] = ()
    label_field: str | None = None
    text_field: str = "text"

    def inputs(self) -> list[str]:
        return [*self.labelled] if self.labelled else [*self.positive, *self.negative]

    def check(self) -> None:
        """The command line's sets make sense before any input is read."""
        if self.labelled and (self.positive or self.negative):
            raise ConfigError("quality train: give --labelled, or --positive and --negative, not both")
        if self.labelled and not self.label_field:
            raise ConfigError("quality train: --labelled needs --label-field (the column holding 1/0 or true/false)")
        if not self.labelled and (not self.positive or not self.negative):
            raise ConfigError("quality train: give --positive FILE... and --negative FILE... (or --labelled)")

    def sources(self) -> dict[str, Any]:
        """What the model card records of the sets (as before the command was a job)."""
        if self.labelled:
            return {"labelled": list(self.labelled), "label_field": self.label_field}
        return {"positive": list(self.positive), "negative": list(self.negative)}


def file_classes(labels: Labels, files: list, text_mode: str) -> dict[str, bool | None]:
    """Each planned file's class (None: read from its label column); a file in both sets is refused."""
    if labels.labelled:
        return {f.path: None for f in files}
    pos = {f.path for f in expand_inputs(list(labels.positive), text_mode=text_mode)}
    neg = {f.path for f in expand_inputs(list(labels.negative), text_mode=text_mode)}
    both = sorted(pos & neg)
    if both:
        raise ConfigError(f"quality train: {both[0]} is in --positive and in --negative; give each file one class")
    return {f.path: f.path in pos for f in files}


@dataclass(frozen=True)
class ReadTask:
    """One input unit: its usable texts and classes to a part, its unusable records to its rejects."""

    labels: Labels
    classes: dict[str, bool | None]
    text_mode: str = "auto"
    limit: int | None = None

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        work = unit.payload
        stats, sink, texts, marks, columns = Stats(), RejectSink(staging, work), [], [], set()
        field, text_field, path = self.labels.label_field, self.labels.text_field, {f.rel: f.path for f in work.files}
        for raw in read_unit(work, text_mode=self.text_mode, limit=self.limit):
            stats.input += len(raw) + len(raw.rejects)
            sink.add(raw.rejects, stats)
            fixed = self.classes[path[raw.source]]
            for loc, row in zip(raw.locs, raw.to_rows()):
                columns.update(row)
                problem = row_problem(row, text_field, field)
                if problem:
                    sink.add([Reject(raw.source, loc, problem[0], f"{raw.source}:{loc}: {problem[1]}", raw=row)], stats)
                    continue
                texts.append(row[text_field])
                marks.append(fixed if fixed is not None else bool(to_label(row.get(field or ""))))
        stats.kept = len(texts)
        rel = f"_work/{READ_STAGE}/{unit.name}.parquet"
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pydict({"text": texts, "label": marks}, schema=PART), staging / rel)
        sink.close()
        return UnitResult(stats=stats, outputs=[rel], data={"part": rel, "columns": sorted(columns)})


@dataclass(frozen=True)
class FitTask:
    """The one unit of ``quality_fit``: the parts in input order, the columns check, the training."""

    labels: Labels
    out: str
    params: dict
    quantize: bool
    sources: dict

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        parts, columns = unit.payload
        check_columns(self.labels.inputs(), set(columns), {"--text-field": self.labels.text_field,
                                                           "--label-field": self.labels.label_field})
        table = pa.concat_tables([pq.read_table(Path(self.out) / rel, schema=PART) for rel in parts])
        texts, marks = table.column("text").to_pylist(), table.column("label").to_pylist()
        pos = [t for t, y in zip(texts, marks) if y]
        neg = [t for t, y in zip(texts, marks) if not y]
        sources = {**self.sources, "positive_documents": len(pos), "negative_documents": len(neg)}
        report = train_quality(pos, neg, out=staging / MODEL_FILE, params=self.params, sources=sources,
                               quantize=self.quantize, progress=say)
        return UnitResult(stats=Stats(), outputs=[MODEL_FILE, MODEL_FILE + CARD_SUFFIX], data={"card": report.card})


def quality_job(labels: Labels, *, params: dict | None = None, quantize: bool = True) -> Job:
    """The ``quality train`` job (module docstring): read per unit, then one fit. The sets and the fastText
    parameters are checked here, before any input is read."""
    labels.check()
    check_params({**DEFAULTS, **(params or {})})

    def configure(run: Run) -> ReadTask:
        run.config["quality_train"] = {**labels.sources(), "text_field": labels.text_field,
                                       "params": dict(params or {}), "quantize": quantize}
        return ReadTask(labels, file_classes(labels, run.files, run.options.text_mode), text_mode=run.options.text_mode,
                        limit=run.options.limit)

    def stages(run: Run) -> list[Stage]:
        def fit(ctx: StageContext) -> StagePlan:
            read = ctx.results[READ_STAGE]
            columns = sorted({c for r in read for c in r.data["columns"]})
            payload = (tuple(r.data["part"] for r in read), tuple(columns))
            return StagePlan([Unit(0, "fit", 0, payload=payload)],
                             FitTask(labels, str(run.out), dict(params or {}), quantize, _sources(run, read)),
                             drop=(f"_work/{READ_STAGE}",))

        say(f"reading {_describe(labels)} ...")
        first = Stage(READ_STAGE, 1, lambda ctx: StagePlan(run.input_units(), run.guarded(run.plan)))
        return [first, Stage(FIT_STAGE, 1, fit)]

    def counts(run: Run, results: Results) -> Stats:
        acc = Stats()
        for r in results[READ_STAGE]:
            acc = acc + r.stats
        return acc

    def report(run: Run, results: Results, manifest: dict) -> dict:
        card = results[FIT_STAGE][0].data["card"]
        return {"quality_model": {"model": MODEL_FILE, "card": MODEL_FILE + CARD_SUFFIX, "scores": card["scores"],
                                  "quantized": bool(card["quantized"]), "data": card["data"],
                                  "chunk_words": card["chunk_words"], "sha256": card["sha256"]},
                "outputs": [MODEL_FILE, MODEL_FILE + CARD_SUFFIX]}

    return Job("quality train", ANY, stages, report, configure=configure, counts=counts)


def _sources(run: Run, read: list[UnitResult]) -> dict[str, Any]:
    """What the model card records of the inputs: the sets, ``--limit``, the unusable records by reason."""
    by_reason: Counter = Counter()
    for r in read:
        by_reason.update(r.stats.rejected)
    sources = {**run.plan.labels.sources()}
    if run.options.limit:
        sources["limit"] = run.options.limit
    sources.update({"unusable_records": sum(by_reason.values()), "unusable_by_reason": dict(by_reason)})
    return sources


def _describe(labels: Labels) -> str:
    if labels.labelled:
        return _files(labels.labelled, "labelled")
    return f"{_files(labels.positive, 'positive')} and {_files(labels.negative, 'negative')}"


def _files(paths: Sequence[str], kind: str) -> str:
    return f"{len(paths)} {kind} file{'' if len(paths) == 1 else 's'}"


def say(line: str) -> None:
    """One progress line on stderr as a phase starts: training and quantising are minutes of silence otherwise."""
    print(f"quality train: {line}", file=sys.stderr, flush=True)
