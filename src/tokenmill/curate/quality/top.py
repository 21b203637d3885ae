"""``quality`` with ``top_fraction``: keep the best-scoring share of the whole corpus, in two stages.

1. ``quality_score`` (a map over the upstream documents stage's units): score every document, write the
   scored documents (``_work/<step>_score/docs/``) and a histogram of the scores (``.../hist/``,
   :data:`BINS` equal bins over [0, 1]).
2. ``quality_apply``: the planner sums the histograms of every unit and takes the cut as the lower edge of
   the highest bin at which the documents at or above it reach ``top_fraction`` of the corpus, and keeps it
   in ``_work/<step>_score/cut.json`` (a resume plans this stage again after the histograms were dropped);
   each unit then keeps the documents scoring at least the cut and writes its documents and ledger part
   (``id``, ``source``, ``loc`` where the documents carry it, ``quality.score``, ``kept``, ``reason``) to
   ``steps/<step>/docs/<unit>.parquet`` and ``steps/<step>/ledger/<unit>.parquet``, like the dedup steps;
   its results carry ``data["docs"]``, ``data["ledger"]``, ``data["unit"]`` and ``data["cut"]``. Once it has
   ended, the scored documents and the histograms are dropped.

Memory is one histogram per unit (``BINS`` int64), whatever the corpus size. Documents sharing the cut's
bin are all kept, so the kept share exceeds ``top_fraction`` by at most one bin's worth (1/65,536 of the
score range). The result depends only on the committed scores, so any number of workers, and a resume in
either stage, give the same bytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.base import segments
from tokenmill.base.files import atomic_write
from tokenmill.curate.dedup.common import provenance
from tokenmill.engine.outputs import Documents, as_data, outputs
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.report.accounting import Stats
from tokenmill.steps.contract import column, reason

if TYPE_CHECKING:
    from tokenmill.curate.quality.classifier import Quality

BINS = 1 << 16


def score_bins(scores: np.ndarray) -> np.ndarray:
    """The histogram bin of each score in [0, 1] (1.0 falls in the last bin)."""
    return np.minimum((np.asarray(scores, dtype=np.float64) * BINS).astype(np.int64), BINS - 1)


def cut_from_histogram(hist: np.ndarray, fraction: float) -> float:
    """The lowest score kept so that at least ``fraction`` of the documents are at or above it."""
    n = int(hist.sum())
    if n == 0:
        return 0.0
    want = math.ceil(fraction * n)
    from_top = np.cumsum(hist[::-1])[::-1]  # from_top[b] = documents in bins >= b
    b = int(np.nonzero(from_top >= want)[0].max())
    return b / BINS


def corpus_cut(path: Path, hists: list[Path], fraction: float) -> float:
    """The cut of the summed ``hists``, kept in ``path`` the first time (fsync, rename) and read from it after.

    The histograms follow from the committed scores alone, so the kept cut is the one they would give again.
    """
    try:
        return float(json.loads(path.read_text())["cut"])
    except FileNotFoundError:
        pass
    hist = sum((np.asarray(segments.load_npy(h)) for h in hists), np.zeros(BINS, dtype=np.int64))
    cut = cut_from_histogram(hist, fraction)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"cut": cut, "documents": int(hist.sum())}).encode())
    return cut


def _upstream_units(ctx: StageContext, upstream: str) -> list[Unit]:
    return [Unit(i, r.unit or Path(r.docs).stem, payload=r.docs)
            for i, r in enumerate(outputs(ctx.results[upstream], Documents, stage=upstream))]


@dataclass(frozen=True)
class ScoreTask:
    step: Quality
    out: str
    work: str

    @property
    def segments(self) -> tuple[str, ...]:  # its documents (and scores) are intermediates (base/segments.py)
        return f"{self.work}/docs", f"{self.work}/hist"

    def setup(self) -> None:
        self.step.setup()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        table = pq.read_table(segments.arrow_source(Path(self.out) / unit.payload))
        scores = self.step.score(as_batch(table))
        s = np.asarray(scores.scores["score"], dtype=np.float32)
        table = table.append_column(column(self.step, "score"), pa.array(s, type=pa.float32()))
        rel_docs = f"{self.work}/docs/{unit.name}.parquet"
        rel_hist = f"{self.work}/hist/{unit.name}.npy"
        for rel in (rel_docs, rel_hist):
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, staging / rel_docs)
        np.save(staging / rel_hist, np.bincount(score_bins(s), minlength=BINS).astype(np.int64))
        return UnitResult(outputs=[rel_docs, rel_hist], data={"scored": rel_docs, "hist": rel_hist})


@dataclass(frozen=True)
class ApplyTask:
    output: ClassVar[type] = Documents  # what its units hand on, checked at commit (engine/outputs.py)
    step: Quality
    out: str
    work: str
    cut: float

    @property
    def segments(self) -> tuple[str, ...]:  # its documents (and scores) are intermediates (base/segments.py)
        return f"{self.work}/docs", f"{self.work}/hist"

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        table = pq.read_table(segments.arrow_source(Path(self.out) / unit.payload))
        col = column(self.step, "score")
        rules = self.step.decide({"score": table.column(col).to_numpy()}, cut=self.cut)
        keep = np.array([r is None for r in rules], dtype=bool)
        why = [None if r is None else reason(self.step, r) for r in rules]
        ledger = pa.table({**provenance(table), col: table.column(col), "kept": pa.array(keep),
                           "reason": pa.array(why, type=pa.string())})
        docs = table.drop_columns([col]).filter(pa.array(keep))
        rel_docs, rel_ledger = f"{self.work}/docs/{unit.name}.parquet", f"{self.work}/ledger/{unit.name}.parquet"
        for rel, t in ((rel_docs, docs), (rel_ledger, ledger)):
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(t, staging / rel)
        stats = Stats(input=table.num_rows, kept=int(keep.sum()))
        if (~keep).any():
            stats.filter(reason(self.step, "low_quality"), int((~keep).sum()))
        return UnitResult(stats=stats, outputs=[rel_docs, rel_ledger],
                          data=as_data(Documents(rel_docs, rel_ledger, unit.name, cut=self.cut, rows=docs.num_rows,
                                                 size=(staging / rel_docs).stat().st_size)))


def as_batch(table: pa.Table) -> pa.RecordBatch:
    """A table as one record batch (steps score batches)."""
    batches = table.combine_chunks().to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def top_fraction_stages(step: Quality, upstream: str) -> list[Stage]:
    """The two stages of a corpus-wide ``top_fraction`` cut over the documents stage ``upstream``."""
    fraction = step.top_fraction
    if fraction is None:  # a threshold step decides per document, in a map stage
        raise ValueError(f"step {step.name!r} has no top_fraction: it is not a corpus step")
    params = {"step": step.name, "version": step.version, "model_sha256": step.model_sha256,
              "top_fraction": fraction, "column": step.column}

    def plan_score(ctx: StageContext) -> StagePlan:
        work = f"_work/{step.name}_score"
        return StagePlan(_upstream_units(ctx, upstream), ScoreTask(step, str(ctx.out), work), params)

    def plan_apply(ctx: StageContext) -> StagePlan:
        scored = ctx.results[f"{step.name}_score"]
        work = f"_work/{step.name}_score"
        cut = corpus_cut(ctx.out / work / "cut.json", [ctx.out / r.data["hist"] for r in scored], fraction)
        units = [Unit(i, Path(r.data["scored"]).stem, payload=r.data["scored"]) for i, r in enumerate(scored)]
        return StagePlan(units, ApplyTask(step, str(ctx.out), f"steps/{step.name}", cut),
                         {**params, "cut": cut}, drop=(f"{work}/docs", f"{work}/hist"))

    return [Stage(f"{step.name}_score", 1, plan_score), Stage(f"{step.name}_apply", 1, plan_apply)]
