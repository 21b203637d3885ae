"""``tokenmill lm train``: an n-gram language model of reference text (interpolated modified Kneser-Ney, as
KenLM's ``lmplz`` estimates it), for the ``perplexity`` curation step (CCNet's filter) and for KenLM.

A Job of the one driver (:mod:`tokenmill.job.run`), like ``sft select``: an ``lm_count`` stage over the input
units (read documents as ``pretrain`` does, normalise them into words, :mod:`tokenmill.lm.normalize`; count
every n-gram of orders 1..N in chunks, :mod:`tokenmill.lm.counts`; each unit's sorted counts under ``_work/``),
then one ``lm_build`` unit: the units' counts merged on one vocabulary, the estimate and pruning
(:mod:`tokenmill.lm.estimate`), and the model written as ``model.arpa`` (KenLM reads it) and ``model.tmlm``
(tokenmill's binary form, :mod:`tokenmill.lm.model`).

Memory: a count unit holds its distinct n-grams and one chunk of text, never the file; the build holds the
distinct n-grams of every order (the model before pruning), never the text.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.io import read_unit
from tokenmill.io.documents import to_documents
from tokenmill.job.options import JobOptions
from tokenmill.job.run import Job, Results, Run
from tokenmill.job.run import run as run_job
from tokenmill.lm import normalize
from tokenmill.lm.counts import UnitCounts, merged_order, merged_vocab
from tokenmill.lm.estimate import estimate
from tokenmill.lm.model import ARPA, BINARY, write_arpa, write_binary
from tokenmill.report.accounting import Stats
from tokenmill.report.rejects import RejectSink
from tokenmill.track import staged_files

COUNT_STAGE, BUILD_STAGE = "lm_count", "lm_build"
MAX_ORDER = 7


@dataclass(frozen=True)
class LmSettings:
    """What the model is: its order, its language (recorded; the ``perplexity`` step checks it), the pruning
    thresholds per order (``prune[n-1]``: drop n-grams of order n with an adjusted count at most it; the last
    value holds for the orders above), and the words per counting chunk (memory, not the model)."""

    order: int = 5
    language: str | None = None
    prune: tuple[int, ...] = (0, 0, 1)
    chunk_words: int = 1_000_000

    def __post_init__(self) -> None:
        problems = []
        if not 1 <= self.order <= MAX_ORDER:
            problems.append(f"--order {self.order}: expected 1 to {MAX_ORDER} (CCNet's models are 5-grams)")
        if any(p < 0 for p in self.prune) or not self.prune:
            problems.append(f"--prune {' '.join(map(str, self.prune))}: expected counts of 0 or more, one per order")
        elif self.prune[0] != 0:
            problems.append(f"--prune {' '.join(map(str, self.prune))}: unigrams are never pruned; start with 0")
        if self.language is not None and not _is_language(self.language):
            problems.append(f"--language {self.language!r}: expected a language code such as en, de or zh "
                            "(what the `language` step writes)")
        if self.chunk_words < 1000:
            problems.append(f"chunk_words {self.chunk_words}: expected at least 1000")
        if problems:
            raise ConfigError("lm train: " + "; ".join(problems))


def _is_language(code: str) -> bool:
    return code.isascii() and code.replace("_", "").replace("-", "").isalpha() and 2 <= len(code) <= 12


def train(inputs: Sequence[str], *, out: str | Path, settings: LmSettings | None = None,
          options: JobOptions | None = None) -> dict:
    """Train the model of ``inputs`` into ``out``; return the manifest (a dry run: the plan)."""
    _refuse_empty_files(inputs)
    return run_job(lm_job(settings or LmSettings()), inputs, out=out, options=options or JobOptions(), tokenizer=None)


def lm_job(settings: LmSettings) -> Job:
    """The ``lm train`` job (module docstring)."""

    def configure(run: Run) -> CountTask:
        _refuse_empty(run)
        run.config["lm"] = {**asdict(settings), "prune": list(settings.prune), "normalization": normalize.describe()}
        return CountTask(settings, run.inputs.schemas, text_mode=run.options.text_mode, limit=run.options.limit)

    def stages(run: Run) -> list[Stage]:
        def build(ctx: StageContext) -> StagePlan:
            parts = tuple(r.data["part"] for r in ctx.results[COUNT_STAGE])
            return StagePlan([Unit(0, "build", 0, payload=parts)], BuildTask(settings, str(run.out)),
                             drop=(f"_work/{COUNT_STAGE}",))

        first = Stage(COUNT_STAGE, 1, lambda ctx: StagePlan(run.input_units(), run.guarded(run.plan)))
        return [first, Stage(BUILD_STAGE, 1, build)]

    def counts(run: Run, results: Results) -> Stats:
        acc = Stats()
        for r in results[COUNT_STAGE]:
            acc = acc + r.stats
        return acc

    def report(run: Run, results: Results, manifest: dict) -> dict:
        return {"model": results[BUILD_STAGE][0].data["model"], "outputs": list(OUTPUTS)}

    def describe(run: Run) -> dict:
        return {"model": {"order": settings.order, "language": settings.language, "prune": list(settings.prune)}}

    return Job("lm train", "pretrain", stages, report, configure=configure, counts=counts, describe=describe)


def _refuse_empty(run: Run) -> None:
    """An empty reference is refused before any work (a model of nothing scores everything alike)."""
    if not run.inputs.files or all(f.size == 0 for f in run.inputs.files):
        names = ", ".join(f.rel for f in run.inputs.files) or "the inputs"
        raise ConfigError(f"lm train: {names}: the reference text is empty; give --text files that hold documents "
                          "(the text the model should find likely: Wikipedia, books, a curated set)")


def _refuse_empty_files(inputs: Sequence[str]) -> None:
    """A named reference file of 0 bytes is refused as what it is, before routing calls it unknown data."""
    empty = [str(p) for p in inputs if isinstance(p, (str, Path)) and os.path.isfile(p) and os.path.getsize(p) == 0]
    if empty:
        raise ConfigError(f"lm train: --text {' '.join(empty)}: the reference file is empty; give --text files "
                          "that hold documents (the text the model should find likely: Wikipedia, books, a curated set)")


OUTPUTS = (ARPA, BINARY)


@dataclass(frozen=True)
class CountTask:
    """One input unit: its documents normalised into sentences of words, every n-gram counted; the unit's
    counts under ``_work/lm_count/<unit>/``."""

    settings: LmSettings
    schemas: dict[str, dict]
    text_mode: str = "auto"
    limit: int | None = None

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        work, stats = unit.payload, Stats()
        sink = RejectSink(staging, work)
        counter = UnitCounts(self.settings.order, self.settings.chunk_words)
        for raw in read_unit(work, text_mode=self.text_mode, limit=self.limit):
            stats.input += len(raw) + len(raw.rejects)
            stats.bytes_in += raw.nbytes
            sink.add(raw.rejects, stats)
            docs, rejects = to_documents(raw, self.schemas.get(raw.source, {}))
            sink.add(rejects, stats)
            for text in docs.column("text").to_pylist():
                found = list(normalize.sentences(text))
                if found:
                    stats.kept += 1
                    counter.add(found)
                else:
                    stats.filter("lm:no_words")
        rel = f"_work/{COUNT_STAGE}/{unit.name}"
        counter.write(staging / rel)
        stats.tokens = counter.words
        stats.extra["sentences"] = counter.sentences
        sink.close()
        return UnitResult(stats=stats, outputs=staged_files(staging), data={"part": rel})


@dataclass(frozen=True)
class BuildTask:
    """The one ``lm_build`` unit: merge, estimate, prune, write ``model.arpa`` and ``model.tmlm``."""

    settings: LmSettings
    out: str

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        dirs = [Path(self.out) / rel for rel in unit.payload]
        vocab, maps = merged_vocab(dirs)
        orders = [merged_order(dirs, maps, n) for n in range(1, self.settings.order + 1)]
        if len(orders[0][0]) == 0:
            raise ConfigError("lm train: the reference text holds no words (every document is empty or whitespace); "
                              "give --text files with text in them")
        model = estimate(vocab, orders, self.settings.prune)
        write_arpa(model, staging / ARPA)
        write_binary(model, staging / BINARY, language=self.settings.language,
                     normalization=normalize.VERSION)
        info = {"order": self.settings.order, "language": self.settings.language, "vocabulary": model.size,
                **model.info, "estimate": "interpolated modified Kneser-Ney",
                "bytes": {name: (staging / name).stat().st_size for name in (ARPA, BINARY)}}
        return UnitResult(outputs=[ARPA, BINARY], data={"model": info})
