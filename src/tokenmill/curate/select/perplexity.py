"""The ``perplexity`` step: CCNet's filter, each document's perplexity under an n-gram model of reference text
(``tokenmill lm train``), low perplexity meaning "like the reference".

A document's perplexity is ``10 ** (-sum log10 p / n)`` over its lines (each scored after ``<s>``, its words
and ``</s>`` predicted, the words normalised as the model's were: :mod:`tokenmill.lm.normalize`), ``n``
counting the words and one ``</s>`` per line, as CCNet counts them. A document without a word has an
infinite perplexity and is removed as ``no_words``. The ledger column is ``perplexity.perplexity``.

Two ways to decide:

* ``max: 1000``: a document step; perplexity above ``max`` is ``high_perplexity``. ``tokenmill funnel --set
  perplexity.max=...`` replays it exactly from the ledger.
* ``keep: [head, middle]``: a corpus step with CCNet's buckets over the run's own perplexities: ``head`` below
  the 30th percentile, ``middle`` from the 30th to below the 60th, ``tail`` the rest (``percentiles`` changes
  the two). Two stages, like ``quality``'s ``top_fraction`` (:mod:`tokenmill.curate.quality.top`): every
  unit scores its documents and writes a histogram of log10 perplexity (:data:`BINS` bins over
  [0, :data:`MAX_LOG10`]); the sum of the units' histograms gives each percentile as the lower edge of the
  first bin with at least that share of the documents below it (a bin is 1/8192 of a decade wide: 0.03%
  in perplexity), kept in ``_work/`` for a resume; then each unit keeps the documents of the buckets asked
  for. The ledger also holds ``perplexity.bucket``. The same bytes at any worker count.

``language``: the language the documents are in (a model trained on another language's text is refused, as
CCNet keeps one model per language).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.base import segments
from tokenmill.base.files import atomic_write
from tokenmill.curate.dedup.common import provenance
from tokenmill.curate.quality.top import as_batch
from tokenmill.engine.outputs import Documents, as_data, outputs
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.lm import normalize
from tokenmill.lm.model import ARPA, BINARY, NgramModel, read_header
from tokenmill.report.accounting import Stats
from tokenmill.steps.contract import Scored, column, reason

BUCKETS = ("head", "middle", "tail")
BINS, MAX_LOG10 = 1 << 16, 8.0
_MODELS: dict[str, NgramModel] = {}


def model_file(model: str) -> Path:
    """The binary model of ``model`` (the directory `lm train` wrote, or its ``model.tmlm``)."""
    path = Path(model)
    return path / BINARY if path.is_dir() else path


def load(model: str, sha256: str) -> NgramModel:
    """The model, loaded once per process (memory-mapped)."""
    key = f"{model_file(model)}:{sha256}"
    if key not in _MODELS:
        _MODELS[key] = NgramModel(model_file(model))
    return _MODELS[key]


def perplexities(model: NgramModel, texts: list[str]) -> np.ndarray:
    """Each text's perplexity (module docstring); ``inf`` for a text without a word."""
    sentences, owner = [], []
    for i, text in enumerate(texts):
        for words in normalize.sentences(text):
            sentences.append(words)
            owner.append(i)
    logp = model.score(sentences)
    owner = np.asarray(owner, dtype=np.int64)
    total = np.bincount(owner, weights=logp, minlength=len(texts))
    tokens = np.bincount(owner, weights=[len(s) + 1 for s in sentences], minlength=len(texts))
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(tokens > 0, 10.0 ** (-total / np.maximum(tokens, 1)), np.inf)


def log_bins(ppl: np.ndarray) -> np.ndarray:
    """The histogram bin of each perplexity: log10 over [0, MAX_LOG10] (``inf`` and beyond: the last bin)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log10(np.maximum(np.asarray(ppl, dtype=np.float64), 1.0)) / MAX_LOG10 * BINS
    return np.clip(np.nan_to_num(x, nan=BINS - 1, posinf=BINS - 1), 0, BINS - 1).astype(np.int64)


def percentile_bins(hist: np.ndarray, shares: tuple[float, ...]) -> list[int]:
    """For each share, the first bin with at least that share of the documents in the bins below it."""
    below = np.concatenate([[0], np.cumsum(hist)])  # below[b] = documents in bins < b
    n = int(hist.sum())
    return [int(np.nonzero(below >= share * n)[0].min()) if n else 0 for share in shares]


def bin_edge(b: int) -> float:
    return float(10.0 ** (b * MAX_LOG10 / BINS))


@dataclass(frozen=True)
class Perplexity:
    """Score every document's perplexity under ``model``; keep those at most ``max``, or the CCNet buckets
    in ``keep`` (module docstring)."""

    model: str = ""
    max: float | None = None
    keep: list[str] | None = None
    percentiles: list[float] = field(default_factory=lambda: [30.0, 60.0])
    language: str | None = None
    name: str = "perplexity"
    version: int = 1
    model_sha256: str = ""  # the model file's, always computed here (a parameter so that a replay can pass it back)
    thresholds: ClassVar[dict] = {"perplexity": "max"}
    decision_params: ClassVar[tuple] = ("max",)

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        try:
            header = read_header(model_file(self.model))
        except ConfigError as exc:
            raise ValueError(f"model: {exc.problems[0]}") from None
        if self.language is not None and header.get("language") != self.language:
            trained = f"trained on {header['language']!r} text" if header.get("language") else "of no recorded language"
            raise ValueError(f"model: {self.model} is a model {trained}, not {self.language!r}: give the {self.language} "
                             f"model, or train one: `tokenmill lm train --text REF... --language {self.language} "
                             "--out DIR`")
        if header.get("normalization") != normalize.VERSION:
            raise ValueError(f"model: {self.model} normalises words by rules version {header.get('normalization')}, "
                             f"this tokenmill by {normalize.VERSION}: train it again with `tokenmill lm train`")
        digest = hashlib.sha256(model_file(self.model).read_bytes()).hexdigest()
        object.__setattr__(self, "model_sha256", digest)

    @property
    def corpus(self) -> bool:
        return self.keep is not None

    def setup(self) -> None:
        load(self.model, self.model_sha256)

    def warm(self) -> None:
        load(self.model, self.model_sha256)

    def score(self, batch: pa.RecordBatch) -> Scored:
        texts = batch.column("text").to_pylist()
        return Scored({"perplexity": perplexities(load(self.model, self.model_sha256), texts)})

    def decide(self, scores: Mapping[str, np.ndarray], *, cuts: list[int] | None = None) -> np.ndarray:
        """``no_words`` for a document without a word; above ``max`` ``high_perplexity``; with ``cuts`` (the
        run's percentile bins), ``bucket_<name>`` for a bucket not kept."""
        ppl = np.asarray(scores["perplexity"], dtype=np.float64)
        out = np.full(len(ppl), None, dtype=object)
        if cuts is not None:
            names = np.array(BUCKETS, dtype=object)[bucket_of(ppl, cuts)]
            drop = ~np.isin(names, list(self.keep or ()))
            out[drop] = ["bucket_" + b for b in names[drop]]
        elif self.max is not None:
            out[ppl > self.max] = "high_perplexity"
        out[~np.isfinite(ppl)] = "no_words"
        return out

    def stages(self, upstream: str) -> list[Stage]:
        return bucket_stages(self, upstream)


def bucket_of(ppl: np.ndarray, cuts: list[int]) -> np.ndarray:
    """0 (head), 1 (middle) or 2 (tail) for each perplexity, by its histogram bin against the cut bins."""
    bins = log_bins(ppl)
    return (bins >= cuts[0]).astype(np.int64) + (bins >= cuts[1]).astype(np.int64)


def _problems(step: Perplexity) -> list[str]:
    problems = []
    if not isinstance(step.model, str) or not step.model:
        problems.append("model: give the directory `tokenmill lm train --out DIR` wrote")
    elif Path(step.model).is_dir() and not model_file(step.model).is_file():
        arpa = " (an ARPA file alone is not read: the step loads the binary form `lm train` writes beside it)" \
            if (Path(step.model) / ARPA).is_file() else ""
        problems.append(f"model: {step.model!r} holds no {BINARY}, so it is not a directory `tokenmill lm train` "
                        f"wrote{arpa}: train one with `tokenmill lm train --text REF... --out DIR`")
    elif not model_file(step.model).is_file():
        problems.append(f"model: {step.model!r} not found (train it with `tokenmill lm train --text REF... --out DIR`)")
    if (step.max is None) == (step.keep is None):
        problems.append("give max (a perplexity, e.g. max: 1000) or keep (CCNet buckets, e.g. keep: [head, middle])")
    if step.max is not None and (isinstance(step.max, bool) or not isinstance(step.max, (int, float)) or step.max <= 0):
        problems.append(f"max: expected a positive perplexity, got {step.max!r}")
    if step.keep is not None and (not isinstance(step.keep, list) or not step.keep
                                  or any(b not in BUCKETS for b in step.keep)):
        problems.append(f"keep: expected a list of {', '.join(BUCKETS)}, got {step.keep!r}")
    p = step.percentiles
    if not (isinstance(p, list) and len(p) == 2 and all(isinstance(x, (int, float)) for x in p) and 0 < p[0] < p[1] < 100):
        problems.append(f"percentiles: expected two increasing percentiles between 0 and 100, got {p!r}")
    return problems


# --- the corpus step: two stages, the buckets over the run -----------------------------------------------

@dataclass(frozen=True)
class ScoreTask:
    """One upstream unit: its documents scored, written with the score, and their log10 histogram."""

    step: Perplexity
    out: str
    work: str

    @property
    def segments(self) -> tuple[str, ...]:  # its documents (and scores) are intermediates (base/segments.py)
        return f"{self.work}/docs", f"{self.work}/hist"

    def setup(self) -> None:
        self.step.setup()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        table = pq.read_table(segments.arrow_source(Path(self.out) / unit.payload))
        ppl = np.asarray(self.step.score(as_batch(table)).scores["perplexity"], dtype=np.float64)
        table = table.append_column(column(self.step, "perplexity"), pa.array(ppl, type=pa.float64()))
        rel_docs, rel_hist = f"{self.work}/docs/{unit.name}.parquet", f"{self.work}/hist/{unit.name}.npy"
        for rel in (rel_docs, rel_hist):
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, staging / rel_docs)
        np.save(staging / rel_hist, np.bincount(log_bins(ppl), minlength=BINS).astype(np.int64))
        return UnitResult(outputs=[rel_docs, rel_hist], data={"scored": rel_docs, "hist": rel_hist})


@dataclass(frozen=True)
class ApplyTask:
    """One unit: each document's bucket, the buckets not kept removed; documents and ledger part written."""
    output: ClassVar[type] = Documents  # what its units hand on, checked at commit (engine/outputs.py)

    step: Perplexity
    out: str
    work: str
    cuts: tuple[int, ...]

    @property
    def segments(self) -> tuple[str, ...]:  # its documents (and scores) are intermediates (base/segments.py)
        return f"{self.work}/docs", f"{self.work}/hist"

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        table = pq.read_table(segments.arrow_source(Path(self.out) / unit.payload))
        col = column(self.step, "perplexity")
        ppl = table.column(col).to_numpy()
        rules = self.step.decide({"perplexity": ppl}, cuts=list(self.cuts))
        keep = np.array([r is None for r in rules], dtype=bool)
        ledger = pa.table({**provenance(table), col: table.column(col),
                           column(self.step, "bucket"): pa.array(np.array(BUCKETS)[bucket_of(ppl, list(self.cuts))]),
                           "kept": pa.array(keep),
                           "reason": pa.array([None if r is None else reason(self.step, r) for r in rules],
                                              type=pa.string())})
        docs = table.drop_columns([col]).filter(pa.array(keep))
        rel_docs, rel_ledger = f"{self.work}/docs/{unit.name}.parquet", f"{self.work}/ledger/{unit.name}.parquet"
        for rel, t in ((rel_docs, docs), (rel_ledger, ledger)):
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(t, staging / rel)
        stats = Stats(input=table.num_rows, kept=int(keep.sum()))
        for r in rules[~keep]:
            stats.filter(reason(self.step, r))
        return UnitResult(stats=stats, outputs=[rel_docs, rel_ledger],
                          data=as_data(Documents(rel_docs, rel_ledger, unit.name, cut=_cut(self.step, self.cuts),
                                                 rows=docs.num_rows, size=(staging / rel_docs).stat().st_size)))


def _cut(step: Perplexity, cuts: tuple[int, ...]) -> float | None:
    """The perplexity the kept documents are below, where the buckets kept are head, or head and middle."""
    kept = [b in (step.keep or ()) for b in BUCKETS]
    if kept == [True, False, False]:
        return bin_edge(cuts[0])
    if kept == [True, True, False]:
        return bin_edge(cuts[1])
    return None


def run_cuts(path: Path, hists: list[Path], percentiles: list[float]) -> tuple[int, ...]:
    """The percentile bins of the summed ``hists``, kept in ``path`` the first time and read from it after (they
    follow from the committed scores alone)."""
    try:
        return tuple(json.loads(path.read_text())["bins"])
    except FileNotFoundError:
        pass
    hist = sum((np.asarray(segments.load_npy(h)) for h in hists), np.zeros(BINS, dtype=np.int64))
    cuts = percentile_bins(hist, tuple(p / 100 for p in percentiles))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"bins": cuts, "perplexity": [bin_edge(b) for b in cuts],
                                   "documents": int(hist.sum())}).encode())
    return tuple(cuts)


def bucket_stages(step: Perplexity, upstream: str) -> list[Stage]:
    """The two stages of the CCNet buckets over the documents stage ``upstream``."""
    params = {"step": step.name, "version": step.version, "model_sha256": step.model_sha256,
              "keep": step.keep, "percentiles": step.percentiles}
    work = f"_work/{step.name}_score"

    def plan_score(ctx: StageContext) -> StagePlan:
        units = [Unit(i, r.unit or Path(r.docs).stem, payload=r.docs)
                 for i, r in enumerate(outputs(ctx.results[upstream], Documents, stage=upstream))]
        return StagePlan(units, ScoreTask(step, str(ctx.out), work), params)

    def plan_apply(ctx: StageContext) -> StagePlan:
        scored = ctx.results[f"{step.name}_score"]
        cuts = run_cuts(ctx.out / work / "cuts.json", [ctx.out / r.data["hist"] for r in scored], step.percentiles)
        units = [Unit(i, Path(r.data["scored"]).stem, payload=r.data["scored"]) for i, r in enumerate(scored)]
        return StagePlan(units, ApplyTask(step, str(ctx.out), f"steps/{step.name}", cuts),
                         {**params, "cuts": list(cuts)}, drop=(f"{work}/docs", f"{work}/hist"))

    return [Stage(f"{step.name}_score", 1, plan_score), Stage(f"{step.name}_apply", 1, plan_apply)]
