"""The ``dsir`` corpus step: draw ``n`` documents (or a ``fraction``) that look like a reference set, by
importance resampling over hashed n-gram features (DSIR, Xie et al. 2023).

``{name: dsir, target: REF, n: N}`` (or ``fraction: F``) runs in three stages over the documents stage
before it:

1. ``dsir_fit``: per unit, every document's hashed n-grams (:mod:`tokenmill.curate.select.features`) as
   bucket numbers (two bytes each), and the unit's bucket counts (the raw model's share), under
   ``_work/dsir_fit/``: the text is featurised once.
2. ``dsir_score``: the planner sums the units' counts (integers: the same sum in any order) and counts the
   reference (``target``) once, keeping both in ``_work/dsir/model.npz``; each unit then sums every
   document's buckets into its log importance weight ``log p_target(x) - log p_raw(x)``, its word count and its Gumbel key
   (weight + a standard Gumbel draw that is a function of the seed and the document's source and line
   alone) to ``_work/dsir_score/<unit>.npz``.
3. ``dsir``: the planner takes the ``n`` largest keys among the documents of at least ``min_words`` words
   (Gumbel top-k: sampling ``n`` without replacement in proportion to the importance weights), ties broken
   by input order, and keeps the cut in ``_work/dsir/draw.json``; each unit keeps the drawn documents and
   writes its ledger part (``dsir.log_weight``, ``dsir.words``, ``kept``, reason ``dsir_v1:not_drawn`` or
   ``dsir_v1:too_short``).

Memory: one batch (:data:`BATCH_TEXTS` documents, :data:`BATCH_CHARS` characters, read as such from the
unit's file) while featurising (the buckets go to disk a batch at a time), :data:`SCORE_NGRAMS` n-grams while
scoring, and the drawn documents' text while drawing, whatever the unit's size; a per-process cache of hashed
n-grams (bounded); in the draw's planner at most ``2 n`` candidate keys and one unit's (:func:`best_keys`).
Disk: about 4 bytes per word for the fit stage's buckets, dropped once the scores are written. The weights
and the draw depend only on the documents and the seed, so any worker count, unit size or engine gives the
same documents; a resume in any stage gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.base import segments
from tokenmill.base.files import atomic_write
from tokenmill.curate.dedup import common as cm
from tokenmill.curate.select.features import BUCKETS, by_document, counts, gumbel, log_ratio, ngrams, weights_of
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError, TokenmillError
from tokenmill.io import expand_inputs, plan_units, read_unit

FIT, SCORE = "dsir_fit", "dsir_score"
BATCH_TEXTS = 4096  # documents featurised at once (each batch's distinct n-grams are hashed once)
BATCH_CHARS = 1 << 21  # characters featurised at once (about 90 MB of temporaries)
SCORE_NGRAMS = 1 << 20  # n-grams summed into weights at once (about 24 MB of temporaries)


@dataclass(frozen=True)
class Dsir:
    """Keep ``n`` documents (or ``fraction`` of those with at least ``min_words`` words) drawn by importance
    weight toward the reference files ``target``; ``seed`` fixes the draw."""

    target: str | list[str] | tuple[str, ...] = ()
    n: int | None = None
    fraction: float | None = None
    seed: int = 0
    buckets: int = BUCKETS
    min_words: int = 100  # data-selection's min_example_length: shorter documents are never drawn
    name: str = "dsir"
    version: int = 1
    target_sha256: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "target", (self.target,) if isinstance(self.target, str) else tuple(self.target))
        _check(self)
        try:
            object.__setattr__(self, "target_sha256", _digest(self.target))
            texts = _first_texts(self.target)
        except TokenmillError as exc:  # a missing or unreadable reference, named as the reference
            raise ValueError(f"target: {exc}") from None
        if not any(t.strip() for t in texts):
            raise ValueError(f"target: {', '.join(self.target)} holds no document with a non-blank 'text' "
                             "(an empty reference); give the reference set's files (JSONL/Parquet with a text "
                             "column, or plain text)")

    def stages(self, upstream: str) -> list[Stage]:
        return [Stage(FIT, 1, lambda ctx: _plan_fit(self, upstream, ctx)),
                Stage(SCORE, 1, lambda ctx: _plan_score(self, upstream, ctx)),
                Stage(self.name, self.version, lambda ctx: _plan_draw(self, upstream, ctx))]


def _check(step: Dsir) -> None:
    if not step.target or not all(isinstance(t, str) and t for t in step.target):
        raise ValueError("target: give the reference files (a path or a list of paths)")
    if (step.n is None) == (step.fraction is None):
        raise ValueError("give n (documents to draw) or fraction (of the pool), one of the two")
    if step.n is not None and (isinstance(step.n, bool) or not isinstance(step.n, int) or step.n < 1):
        raise ValueError(f"n: expected a whole number >= 1, got {step.n!r}")
    if step.fraction is not None and not (isinstance(step.fraction, (int, float)) and 0 < step.fraction <= 1):
        raise ValueError(f"fraction: expected a share in (0, 1], got {step.fraction!r}")
    for key in ("seed", "min_words"):
        if isinstance(getattr(step, key), bool) or not isinstance(getattr(step, key), int) or getattr(step, key) < 0:
            raise ValueError(f"{key}: expected a whole number >= 0, got {getattr(step, key)!r}")
    if isinstance(step.buckets, bool) or not isinstance(step.buckets, int) or step.buckets < 2:
        raise ValueError(f"buckets: expected a whole number >= 2, got {step.buckets!r}")


def reference_texts(paths: Sequence[str]) -> Iterator[list[str | None]]:
    """The reference files' ``text`` values, a batch at a time (bounded memory for a reference of any size)."""
    for unit in plan_units(expand_inputs(list(paths)), unit_bytes=64 << 20):
        for raw in read_unit(unit):
            if raw.table is not None:
                yield raw.table.column("text").to_pylist() if "text" in raw.table.schema.names else []
            else:
                yield [r.get("text") if isinstance(r.get("text"), str) else None for r in raw.rows or []]


def _first_texts(paths: Sequence[str]) -> list[str]:
    """The reference's first batch holding a non-blank text (empty when none has), read before any work."""
    for batch in reference_texts(paths):
        texts = [t for t in batch if isinstance(t, str) and t.strip()]
        if texts:
            return texts
    return []


def _digest(paths: Sequence[str]) -> str:
    """The reference files' content hash: a changed reference is a new run, never a resume."""
    h = hashlib.sha256()
    for f in expand_inputs(list(paths)):
        h.update(f.path.encode() + b"\0")
        with open(f.path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _batches(texts: list) -> Iterator[list]:
    """``texts`` in runs of at most :data:`BATCH_TEXTS` documents and :data:`BATCH_CHARS` characters (one
    longer document alone): the split's temporaries are some 40 bytes per character, so a batch's memory is
    bounded whatever the documents' length or the unit's size."""
    start, chars = 0, 0
    for i, text in enumerate(texts):
        size = len(text) if isinstance(text, str) else 0
        if i > start and (i - start == BATCH_TEXTS or chars + size > BATCH_CHARS):
            yield texts[start:i]
            start, chars = i, 0
        chars += size
    if start < len(texts):
        yield texts[start:]


def _counts_of(batches: Iterator[list], buckets: int) -> np.ndarray:
    """The bucket counts of ``batches``, featurised a bounded batch (:func:`_batches`) at a time."""
    total = np.zeros(buckets, dtype=np.int64)
    for batch in batches:
        for part in _batches(batch):
            total += counts(part, buckets)
    return total


# --- stage 1: every document's n-gram buckets and the raw model's counts, per unit ---------------------------


def featurise(batches: Iterable[list], buckets: int, out: BinaryIO) -> dict[str, np.ndarray]:
    """A unit's features, kept for the score stage so that the text is featurised once: every document's
    buckets in order written to ``out`` a batch at a time (``uint16`` up to 65,536 buckets, else ``uint32``),
    and its n-gram and word counts and the unit's bucket counts (the raw model's share) returned. Memory is one
    batch's, whatever the unit's size."""
    per_doc, words, total = [], [], np.zeros(buckets, dtype=np.int64)
    for batch in (part for texts in batches for part in _batches(texts)):
        g = ngrams(batch, buckets)
        grouped, n = by_document(g)
        out.write(grouped.astype(bucket_dtype(buckets)).tobytes())
        total += np.bincount(grouped, minlength=buckets)
        per_doc.append(n)
        words.append(g.words)
    return {"per_doc": np.concatenate(per_doc) if per_doc else np.zeros(0, np.int64),
            "words": np.concatenate(words) if words else np.zeros(0, np.int64), "counts": total}


def bucket_dtype(buckets: int) -> type:
    return np.uint16 if buckets <= 1 << 16 else np.uint32


def unit_texts(path: Path) -> Iterator[list]:
    """A documents part's ``text`` column as Python strings, :func:`_text_batches` at a time."""
    for batch in _text_batches(path):
        yield batch.to_pylist()


def _text_batches(path: Path) -> Iterator[pa.Array]:
    """A documents part's ``text`` column, about :data:`BATCH_CHARS` bytes of it at a time (the rows per read
    from the file's own sizes, its pages streamed a MiB at a time), never the whole unit: a read of 4096
    documents was a whole unit of up to 64 MiB, held twice (Arrow's and Python's strings) beside its compressed
    column, so the peak grew with the input's size. Not pre-buffered (pyarrow's default): that reads the whole
column chunk, the unit's compressed text, before the first batch."""
    with pq.ParquetFile(segments.arrow_source(path), buffer_size=1 << 20, pre_buffer=False) as part:
        meta = part.metadata
        size = sum(meta.row_group(g).column(c).total_uncompressed_size for g in range(meta.num_row_groups)
                   for c in range(meta.num_columns) if meta.row_group(g).column(c).path_in_schema == "text")
        rows = max(1, min(BATCH_TEXTS, BATCH_CHARS * meta.num_rows // max(size, 1)))
        for batch in part.iter_batches(batch_size=rows, columns=["text"]):
            yield batch.column(0)


def released() -> None:
    """Give the memory Arrow's pool holds free back to the system before a unit: a unit of the documents
    stage before (the whole unit's text, up to 64 MiB) leaves it in the pool, under this unit's own peak."""
    pa.default_memory_pool().release_unused()


@dataclass(frozen=True)
class FitTask:
    step: Dsir
    out: str

    @property
    def segments(self) -> tuple[str, ...]:  # each unit's features are an intermediate (base/segments.py)
        return (f"_work/{FIT}",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        released()
        rel = f"_work/{FIT}/{unit.name}"
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(staging / f"{rel}.buckets", "wb") as fh:
            features = featurise(unit_texts(Path(self.out) / unit.payload.docs), self.step.buckets, fh)
        with open(staging / f"{rel}.npz", "wb") as fh:
            np.savez(fh, **features)  # pyright: ignore[reportArgumentType] (numpy's stub reads the names as allow_pickle)
        return UnitResult(outputs=[f"{rel}.npz", f"{rel}.buckets"], data={"features": f"{rel}.npz"})


def _plan_fit(step: Dsir, upstream: str, ctx: StageContext) -> StagePlan:
    parts = cm.upstream_parts(ctx, upstream)
    return StagePlan(cm.units_of(parts), FitTask(step, str(ctx.out)), cm.stage_params(step))


# --- stage 2: every document's log importance weight and Gumbel key ------------------------------------------


def model(step: Dsir, path: Path, features: list[Path]) -> np.ndarray:
    """``log p_target - log p_raw`` per bucket; the two count vectors kept in ``path`` the first time."""
    if not path.exists():
        raw = np.zeros(step.buckets, dtype=np.int64)
        for p in features:
            with segments.open_slice(p) as fh, np.load(fh) as f:
                raw += f["counts"]
        target = _counts_of(reference_texts(step.target), step.buckets)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".tmp.npz"), "wb") as fh:
            np.savez(fh, raw=raw, target=target)
        path.with_suffix(".tmp.npz").replace(path)
    with np.load(path) as kept:
        return log_ratio(kept["target"], kept["raw"])


def doc_keys(table) -> list[str]:
    """What a document's Gumbel draw is seeded with: its source and input line (row), else its id."""
    source = table.column("source").to_pylist()
    where = table.column("loc").to_pylist() if "loc" in table.column_names else table.column("id").to_pylist()
    return [f"{s}\0{w}" for s, w in zip(source, where)]


@dataclass(frozen=True)
class ScoreTask:
    """Each unit's weights and keys. The model (``ratio``) is made in the driver when the task is first sent to
    a worker or first run, never at planning: a finished run's planning must read no dropped file."""

    step: Dsir
    out: str
    features: tuple[str, ...]
    ratio: np.ndarray | None = None

    @property
    def segments(self) -> tuple[str, ...]:  # each unit's weights and keys are an intermediate
        return (f"_work/{SCORE}",)

    def ready(self) -> np.ndarray:
        if self.ratio is None:
            out = Path(self.out)
            object.__setattr__(self, "ratio", model(self.step, out / "_work/dsir/model.npz",
                                                    [out / f for f in self.features]))
        assert self.ratio is not None
        return self.ratio

    def __getstate__(self) -> dict:
        self.ready()  # in the driver, once: workers receive the model, not the features to make it from
        return dict(self.__dict__)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        released()
        ratio = self.ready()
        part = unit.payload
        names = pq.read_schema(segments.arrow_source(Path(self.out) / part.docs)).names
        wanted = [c for c in ("id", "source", "loc") if c in names]
        table = pq.read_table(segments.arrow_source(Path(self.out) / part.docs), columns=wanted)
        features = Path(self.out) / self.features[unit.index]
        with segments.open_slice(features) as fh, np.load(fh) as f:
            per_doc, words = f["per_doc"], f["words"]
        weight = unit_weights(features.with_suffix(".buckets"), per_doc, ratio)
        rel = f"_work/{SCORE}/{unit.name}.npz"
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(staging / rel, "wb") as fh:
            np.savez(fh, weight=weight, words=words, key=weight + gumbel(doc_keys(table), self.step.seed))
        return UnitResult(outputs=[rel], data={"scores": rel})


def unit_weights(path: Path, per_doc: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """Each document's log importance weight from the fit stage's bucket file, read a run of whole documents
    of about :data:`SCORE_NGRAMS` n-grams at a time (a document's sum is the same in any run). Read, not
    mapped: the pages of a mapped file count in the process's RSS until it is unmapped, the whole unit's
    buckets (some 40 MB for a 64 MiB unit) by the end."""
    dtype = bucket_dtype(len(ratio))
    ends = np.cumsum(per_doc)
    weight, doc, start = np.zeros(len(per_doc)), 0, 0
    with segments.open_slice(path) as fh:
        while doc < len(per_doc):
            stop = max(int(np.searchsorted(ends, start + SCORE_NGRAMS, side="right")), doc + 1)
            end = int(ends[stop - 1])
            run = np.frombuffer(fh.read((end - start) * np.dtype(dtype).itemsize), dtype=dtype)
            weight[doc:stop] = weights_of(run, per_doc[doc:stop], ratio)
            doc, start = stop, end
    return weight


def _plan_score(step: Dsir, upstream: str, ctx: StageContext) -> StagePlan:
    parts = cm.upstream_parts(ctx, upstream)
    features = tuple(r.data["features"] for r in ctx.results[FIT])
    return StagePlan(cm.units_of(parts), ScoreTask(step, str(ctx.out), features), cm.stage_params(step),
                     drop=(f"_work/{FIT}",))


# --- stage 3: the draw ---------------------------------------------------------------------------------------


def draw(step: Dsir, path: Path, scores: list[Path]) -> dict:
    """The cut: the ``n``-th largest key among the documents long enough, and how many documents holding
    exactly that key each unit keeps (ties go to the earlier in input order). Kept in ``path`` the first
    time; a resume reads it back. Two passes over the units' scores: the pool's size (``n`` may be a share
    of it), then the ``n`` best keys (:func:`best_keys`): memory is at most ``2 n`` candidates and one unit's
    keys, whatever the number of documents."""
    if path.exists():
        return json.loads(path.read_text())
    pool = 0
    for p in scores:
        with segments.open_slice(p) as fh, np.load(fh) as s:
            pool += int(np.count_nonzero(s["words"] >= step.min_words))
    n = wanted(step, pool)
    key, unit = best_keys(_long_enough_keys(step, scores), n)
    cut = float(key[-1])
    ties = np.bincount(unit[key == cut], minlength=len(scores))
    decided = {"cut": cut, "n": n, "pool": pool, "ties": [int(t) for t in ties]}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(decided).encode())
    return decided


def _long_enough_keys(step: Dsir, scores: list[Path]) -> Iterator[np.ndarray]:
    for p in scores:
        with segments.open_slice(p) as fh, np.load(fh) as s:
            yield s["key"][s["words"] >= step.min_words]


def best_keys(units: Iterable[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` largest keys of ``units`` (each unit's keys in input order), largest first, the earlier in
    input order first among equals, and the unit of each: the first ``n`` of one sort of every key, found a
    unit at a time. At most ``2 n`` candidates and one unit are held: past ``2 n`` the candidates are cut to
    their best ``n``, and the ``n``-th of those is a bar a later key must pass (``n`` keys at least as large
    came before it, and an equal key loses to the earlier), so each key is sorted about once."""
    key, unit, at = np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
    bar = None
    for u, keys in enumerate(units):
        where = np.arange(len(keys), dtype=np.int64)
        if bar is not None:
            above = keys > bar
            keys, where = keys[above], where[above]
        key, unit, at = (np.concatenate([key, keys]), np.concatenate([unit, np.full(len(keys), u, np.int64)]),
                         np.concatenate([at, where]))
        if len(key) >= 2 * n:
            key, unit, at = _first(n, key, unit, at)
            bar = key[-1]
    key, unit, _ = _first(n, key, unit, at)
    return key, unit


def _first(n: int, key: np.ndarray, unit: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first ``n`` candidates by key (largest first), then unit and place in it (input order)."""
    best = np.lexsort((at, unit, -key))[:n]
    return key[best], unit[best], at[best]


def wanted(step: Dsir, pool: int) -> int:
    """Documents to draw from a pool of ``pool`` long-enough documents; a one-line error when too many."""
    n = step.n if step.n is not None else math.ceil((step.fraction or 0.0) * pool)  # Dsir takes one of the two
    if n > pool or pool == 0:
        raise ConfigError(f"dsir: n={n:,} but the pool holds {pool:,} documents of at least min_words="
                          f"{step.min_words} words: lower n (--n), give a fraction, or lower min_words "
                          "(then run again with --overwrite)")
    return n


@dataclass(frozen=True)
class DrawTask:
    step: Dsir
    out: str
    decided: dict
    scores: tuple[str, ...]

    @property
    def segments(self) -> tuple[str, ...]:  # its documents are an intermediate (base/segments.py)
        return (f"steps/{self.step.name}/docs",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        released()
        part = unit.payload
        with segments.open_slice(Path(self.out) / self.scores[unit.index]) as fh, np.load(fh) as s:
            weight, words, key = s["weight"], s["words"], s["key"]
        long_enough = words >= self.step.min_words
        drawn = long_enough & (key > self.decided["cut"])
        at_cut = np.nonzero(long_enough & (key == self.decided["cut"]))[0][:self.decided["ties"][unit.index]]
        drawn[at_cut] = True
        prefix = f"{self.step.name}_v{self.step.version}"
        reasons = [None if d else f"{prefix}:not_drawn" if ok else f"{prefix}:too_short"
                   for d, ok in zip(drawn, long_enough)]
        columns = {f"{self.step.name}.log_weight": weight, f"{self.step.name}.words": words}
        table = drawn_only(Path(self.out) / part.docs, drawn)
        return cm.write_documents(staging, self.step.name, part, table, cm.Decision(columns, reasons))


def drawn_only(path: Path, drawn: np.ndarray) -> pa.Table:
    """A documents part with the text of the documents not ``drawn`` left empty (they are dropped, and the
    ledger needs only their identity columns): the text read about :data:`BATCH_CHARS` bytes at a time, so
    that the draw holds the drawn tenth of a unit, not the whole of it. The drawn rows are the part's own."""
    schema = pq.read_schema(segments.arrow_source(path))
    table = pq.read_table(segments.arrow_source(path), columns=[c for c in schema.names if c != "text"])
    chunks, at = [], 0
    for batch in _text_batches(path):
        chunks.append(pc.if_else(pa.array(drawn[at:at + len(batch)]), batch, pa.scalar("", batch.type)))
        at += len(batch)
    field = schema.field("text")
    text = pa.concat_arrays(chunks) if chunks else pa.array([], field.type)
    return table.add_column(schema.names.index("text"), field, pa.chunked_array([text], field.type))


def _plan_draw(step: Dsir, upstream: str, ctx: StageContext) -> StagePlan:
    parts = cm.upstream_parts(ctx, upstream)
    scores = tuple(r.data["scores"] for r in ctx.results[SCORE])
    decided = draw(step, ctx.out / "_work/dsir/draw.json", [ctx.out / s for s in scores])
    return StagePlan(cm.units_of(parts), DrawTask(step, str(ctx.out), decided, scores),
                     cm.stage_params(step, cut=decided["cut"], n=decided["n"]),
                     drop=(f"_work/{SCORE}",))  # the model and the cut stay (two small files): a rerun plans from them
