"""Fuzzy document dedup: MinHash LSH, candidate pairs per hash range, optional exact-Jaccard check, connected
components in bounded memory, one survivor per cluster.

Stages (``U`` upstream units, ``E`` candidate edges, ``B = partition_edges``):

1. ``minhash_dedup.signatures`` (map, ``U`` units): shingles and MinHash signatures of every document
   (:mod:`~tokenmill.curate.dedup.shingles`), one 64-bit key per band, written as ``(key, doc)`` entries
   split into ``P1 = ceil(docs * bands / B)`` hash ranges of the key, plus each document's survivor
   priority. Cost: ``n + 3 * bands * rows`` numpy operations per shingle. With ``verify``, also each
   document's sorted, distinct shingle hashes (:class:`ShingleSetWriter`: 8 bytes per shingle, about the size
   of the text), one sort per document, for stage 3.
2. ``minhash_dedup.buckets`` (``P1`` units): one hash range of every unit's entries (about ``B``
   entries), sorted by ``(key, doc)``; each bucket of ``k >= 2`` documents gives ``k - 1`` candidate edges
   from its members to its first (smallest) document. Edges are written split by the unit of the member.
3. ``minhash_dedup.verify`` (``U`` units, when ``verify``): the candidates of one unit's documents, each
   checked by the exact Jaccard similarity of the two shingle sets; edges below ``threshold`` are dropped.
   Cost: one set intersection per edge; the sets of the candidate documents are read from stage 1's files
   (memory-mapped, only their rows), neither texts read nor shingled again. Re-shingling them read, for each
   unit, the whole text of every unit its candidates lie in: about ``U**2 / 2`` text reads, most of the
   stage's time (BENCHMARKS.md, "Dedup at scale"). The sets are dropped when the stage ends.
4. ``minhash_dedup.components`` (one unit that drives rounds of per-partition calls, Ray tasks on a
   cluster): connected components over the edges in memory bounded by ``B`` per call
   (:mod:`~tokenmill.curate.dedup.components`); the label of every node is the best document of its
   component by ``keep``, which is thereby the cluster id and the survivor.
5. ``minhash_dedup`` (documents stage, ``U`` units): each unit's rows look up their label and cluster size
   (binary search in memory-mapped files); every clustered document that is not its cluster's survivor is
   removed as ``minhash_dedup_v1:duplicate``.

Memory of every stage is bounded by ``B`` (times a few tens of bytes), not by the corpus, except stage
1 and 5 (one upstream unit) and stage 3 (one unit's candidate edges and their documents' shingle sets).
Determinism: entries, edges and labels are sorted by value, ids are ``(unit, row)`` and the labels of
step 4 do not depend on chunking or order, so 1 or N workers and any kill-and-resume give the same bytes.

Defaults: word 5-grams after NFKC, lowercase, punctuation removal and whitespace collapse; 20 bands x 7
rows (a pair of Jaccard ``s`` becomes a candidate with probability ``1 - (1 - s**7)**20``: 0.991 at 0.8,
0.82 at 0.7), candidates verified at exact Jaccard >= 0.8, the earliest document of each cluster kept.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa

from tokenmill.base import segments
from tokenmill.curate.dedup import common as cm
from tokenmill.curate.dedup import components as cc
from tokenmill.curate.dedup.shingles import (
    band_keys,
    jaccard,
    permutations,
    shingle_hashes,
    signatures,
    tokens,
    unique_per_doc,
)
from tokenmill.engine.outputs import Documents, Partitioned, as_data, outputs
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.report.accounting import Stats
from tokenmill.steps.contract import column, reason

BATCH_DOCS = 1024


@dataclass(frozen=True)
class MinHashDedup:
    """Remove near-duplicate documents (see the module docstring for the algorithm and its costs)."""

    ngram: int = 5
    shingle: str = "word"  # "word" or "char" n-grams
    normalize: tuple[str, ...] = ("nfkc", "lower", "punctuation", "whitespace")
    bands: int = 20
    rows: int = 7
    seed: int = 1
    verify: bool = True  # check candidates by exact Jaccard of the shingle sets
    threshold: float = 0.8  # the exact Jaccard a verified pair needs
    keep: str = "first"  # survivor: "first" (earliest), "longest", "max:<ledger column>"
    partition_edges: int = 2_000_000  # rows (entries, edges, nodes) one partition holds in memory
    name: str = "minhash_dedup"
    version: int = 1
    cluster_size_stat: ClassVar[str] = "cluster_size"  # the funnel's and the report's cluster table
    id_stats: ClassVar[tuple] = ("cluster",)

    def __post_init__(self):
        object.__setattr__(self, "normalize", tuple(self.normalize))
        problems = []
        if self.shingle not in ("word", "char"):
            problems.append(f"minhash_dedup: shingle={self.shingle!r} must be 'word' or 'char'")
        for f in ("ngram", "bands", "rows", "partition_edges"):
            if not isinstance(getattr(self, f), int) or getattr(self, f) < 1:
                problems.append(f"minhash_dedup: {f} must be a positive integer, not {getattr(self, f)!r}")
        if not 0.0 <= float(self.threshold) <= 1.0:
            problems.append(f"minhash_dedup: threshold must lie in [0, 1], not {self.threshold!r}")
        if problems:
            raise ConfigError(problems)
        cm.check_normalize(self.normalize, "minhash_dedup")
        cm.check_keep(self.keep, "minhash_dedup")

    def stages(self, upstream: str) -> list[Stage]:
        n = self.name
        stages = [Stage(f"{n}.signatures", 1, lambda ctx: _plan_signatures(self, upstream, ctx)),
                  Stage(f"{n}.buckets", 1, lambda ctx: _plan_buckets(self, upstream, ctx))]
        if self.verify:
            stages.append(Stage(f"{n}.verify", 1, lambda ctx: _plan_verify(self, upstream, ctx)))
        stages += [Stage(f"{n}.components", 1, lambda ctx: _plan_components(self, upstream, ctx)),
                   Stage(n, self.version, lambda ctx: _plan_apply(self, upstream, ctx))]
        return stages

    def candidate_probability(self, similarity: float) -> float:
        """The chance that two documents of this Jaccard similarity share at least one band."""
        return 1.0 - (1.0 - similarity ** self.rows) ** self.bands


# --- planners -------------------------------------------------------------------------------------


def _plan_signatures(step: MinHashDedup, upstream: str, ctx: StageContext) -> StagePlan:
    parts = cm.upstream_parts(ctx, upstream)
    p1 = cm.n_partitions(sum(p.rows for p in parts) * step.bands, step.partition_edges)
    return StagePlan(cm.units_of(parts), SignatureTask(step, str(ctx.out), p1),
                     cm.stage_params(step, partitions=p1, shingle_sets=step.verify))


def _plan_buckets(step: MinHashDedup, upstream: str, ctx: StageContext) -> StagePlan:
    dirs, p1 = cm.partitioned(ctx, f"{step.name}.signatures")
    units = [Unit(p, f"part-{p:05d}", payload=p) for p in range(p1)]
    return StagePlan(units, BucketTask(str(ctx.out), dirs, len(dirs), step.name), cm.stage_params(step))


def _plan_verify(step: MinHashDedup, upstream: str, ctx: StageContext) -> StagePlan:
    parts = cm.upstream_parts(ctx, upstream)
    dirs, _ = cm.partitioned(ctx, f"{step.name}.buckets")
    sets = tuple(r.data["sets"] for r in ctx.results[f"{step.name}.signatures"])
    return StagePlan(cm.units_of(parts), VerifyTask(step, str(ctx.out), dirs, sets), cm.stage_params(step),
                     drop=(f"_work/{step.name}/buckets", f"_work/{step.name}/sets"))


def _plan_components(step: MinHashDedup, upstream: str, ctx: StageContext) -> StagePlan:
    source = f"{step.name}.verify" if step.verify else f"{step.name}.buckets"
    edges, _ = cm.partitioned(ctx, source)
    sigs, _ = cm.partitioned(ctx, f"{step.name}.signatures")
    task = ComponentsTask(str(ctx.out), edges, sigs, step.partition_edges, step.name)
    read = ("verified" if step.verify else "buckets", "signatures")
    return StagePlan([Unit(0, "all")], task, cm.stage_params(step), drop=tuple(f"_work/{step.name}/{d}" for d in read))


def _plan_apply(step: MinHashDedup, upstream: str, ctx: StageContext) -> StagePlan:
    parts = cm.upstream_parts(ctx, upstream)
    (comp,) = outputs(ctx.results[f"{step.name}.components"], Partitioned, stage=f"{step.name}.components")
    task = ApplyTask(step, str(ctx.out), comp.dir, comp.partitions)
    return StagePlan(cm.units_of(parts), task, cm.stage_params(step), drop=(comp.dir,))


# --- tasks ----------------------------------------------------------------------------------------


def _signatures_of(step: MinHashDedup, texts: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(signatures, shingle count, shingle hashes one document after another) of a batch of texts."""
    values, counts = tokens(texts, kind=step.shingle, normalize=step.normalize)
    sh, per_doc = shingle_hashes(values, counts, step.ngram)
    a, b = permutations(step.bands * step.rows, step.seed)
    return signatures(sh, per_doc, a, b), per_doc, sh


@dataclass(frozen=True)
class SignatureTask:
    output: ClassVar[type] = Partitioned  # what its units hand on, checked at commit (engine/outputs.py)
    step: MinHashDedup
    out: str
    partitions: int

    @property
    def segments(self) -> tuple[str, ...]:  # its units' files go to segment files (base/segments.py)
        return f"_work/{self.step.name}/signatures", f"_work/{self.step.name}/sets"

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        part: cm.DocsPart = unit.payload
        table = cm.read_docs(Path(self.out), part)
        prio = cm.priorities(self.step.keep, table, cm.read_ledger(Path(self.out), part))
        keys, docs = [], []
        texts = table.column("text")
        ids = cm.global_ids(unit.index, table.num_rows)
        sets_rel = f"_work/{self.step.name}/sets/{unit.name}.sets"
        with ShingleSetWriter(staging / sets_rel) if self.step.verify else nullcontext() as sets:
            for lo in range(0, table.num_rows, BATCH_DOCS):
                chunk = texts.slice(lo, BATCH_DOCS).combine_chunks()
                sig, per_doc, sh = _signatures_of(self.step, chunk)
                k = band_keys(sig, self.step.bands, self.step.rows)[per_doc > 0]
                keys.append(k.ravel())
                docs.append(np.repeat(ids[lo:lo + len(chunk)][per_doc > 0], self.step.bands))
                if sets is not None:
                    sets.add(*unique_per_doc(sh, per_doc))
        key = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
        doc = np.concatenate(docs) if docs else np.zeros(0, np.int64)
        rel = f"_work/{self.step.name}/signatures/{unit.name}"
        cm.write_partitioned(staging / rel, cm.partition_of(key, self.partitions), self.partitions,
                             {"key": key, "doc": doc}, order=(doc, key))
        np.save(staging / rel / "prio.npy", prio)
        extra = {"sets": sets_rel} if self.step.verify else {}
        return UnitResult(stats=Stats(input=table.num_rows, kept=table.num_rows),
                          data=as_data(Partitioned(rel, self.partitions), entries=len(key), **extra))


class ShingleSetWriter:
    """Writes a unit's shingle sets for the check (:class:`VerifyTask`) to one file, ``<unit>.sets``, open once
    for the unit: every document's sorted, distinct shingle hashes one document after another (little-endian
    uint64, written batch by batch), then ``rows + 1`` int64 offsets into them (document ``row`` is
    ``offsets[row]:offsets[row+1]``), then ``rows`` as the last 8 bytes (:func:`read_sets`). 8 bytes per
    distinct shingle: about 4 KB per document of web text, about the size of the text itself."""

    def __init__(self, path: Path):
        self.path = path
        self.sizes: list[np.ndarray] = []

    def __enter__(self) -> ShingleSetWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.path, "wb")  # closed in __exit__
        return self

    def add(self, hashes: np.ndarray, sizes: np.ndarray) -> None:
        self.fh.write(hashes.astype("<u8", copy=False).data.cast("B"))
        self.sizes.append(sizes)

    def __exit__(self, kind, *_) -> None:
        """The offsets and the row count after the hashes (only when the unit's batches all went in)."""
        with self.fh:
            if kind is None:
                sizes = np.concatenate(self.sizes) if self.sizes else np.zeros(0, np.int64)
                self.fh.write(np.concatenate([[0], np.cumsum(sizes)]).astype("<i8").data.cast("B"))
                self.fh.write(np.array([len(sizes)], "<i8").data.cast("B"))


def read_sets(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A unit's stored shingle sets (:class:`ShingleSetWriter`): the hashes, memory-mapped, and the offsets."""
    stored = segments.memmap(path, "<u8", 0, (segments.size(path) // 8,))
    rows = int(stored[-1])
    offsets = np.array(stored[len(stored) - rows - 2:len(stored) - 1], dtype=np.int64)
    return stored[:offsets[-1]], offsets


@dataclass(frozen=True)
class BucketTask:
    out: str
    dirs: tuple[str, ...]
    n_units: int
    name: str

    @property
    def segments(self) -> tuple[str, ...]:
        return (f"_work/{self.name}/buckets",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        got = cm.read_partition([Path(self.out) / d for d in self.dirs], unit.payload, ["key", "doc"])
        key, doc = got["key"].astype(np.uint64), got["doc"].astype(np.int64)
        order = np.lexsort((doc, key))
        key, doc = key[order], doc[order]
        first = np.concatenate([[True], key[1:] != key[:-1]]) if len(key) else np.zeros(0, bool)
        center = doc[np.maximum.accumulate(np.where(first, np.arange(len(doc)), 0))] if len(doc) else doc
        a, b = _unique_pairs(doc[~first], center[~first])
        rel = f"_work/{self.name}/buckets/{unit.name}"
        cm.write_partitioned(staging / rel, cm.unit_of(a), self.n_units, {"a": a, "b": b}, order=(b, a))
        return UnitResult(data={"dir": rel, "edges": len(a), "entries_held": len(key)})


def _unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = a != b
    a, b = a[keep], b[keep]
    if not len(a):
        return a.astype(np.int64), b.astype(np.int64)
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    new = np.concatenate([[True], (a[1:] != a[:-1]) | (b[1:] != b[:-1])])
    return a[new], b[new]


@dataclass(frozen=True)
class VerifyTask:
    step: MinHashDedup
    out: str
    dirs: tuple[str, ...]
    sets: tuple[str, ...]  # each upstream unit's shingle sets (ShingleSetWriter), in unit order

    @property
    def segments(self) -> tuple[str, ...]:
        return (f"_work/{self.step.name}/verified",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        got = cm.read_partition([Path(self.out) / d for d in self.dirs], unit.index, ["a", "b"])
        a, b = _unique_pairs(got["a"].astype(np.int64), got["b"].astype(np.int64))
        sets = self._shingle_sets(np.union1d(a, b))
        sim = np.array([jaccard(sets[x], sets[y]) for x, y in zip(a.tolist(), b.tolist())], dtype=np.float64)
        ok = sim >= self.step.threshold
        rel = f"_work/{self.step.name}/verified/{unit.name}"
        cm.write_partitioned(staging / rel, np.zeros(int(ok.sum()), dtype=np.int64), 1, {"a": a[ok], "b": b[ok]})
        return UnitResult(data={"dir": rel, "candidates": len(a), "verified": int(ok.sum())})

    def _shingle_sets(self, ids: np.ndarray) -> dict[int, np.ndarray]:
        """The stored shingle sets of ``ids`` (sorted global ids), read from each unit's memory-mapped file."""
        sets: dict[int, np.ndarray] = {}
        units = cm.unit_of(ids)
        for u in np.unique(units).tolist():
            mine = ids[units == u]
            hashes, offsets = read_sets(Path(self.out) / self.sets[u])
            for node, row in zip(mine.tolist(), cm.row_of(mine).tolist()):
                sets[node] = np.array(hashes[offsets[row]:offsets[row + 1]], dtype=np.uint64)
        return sets


@dataclass(frozen=True)
class ComponentsTask:
    output: ClassVar[type] = Partitioned  # what its units hand on, checked at commit (engine/outputs.py)
    out: str
    edge_dirs: tuple[str, ...]
    sig_dirs: tuple[str, ...]
    partition_edges: int
    name: str
    fans_out: ClassVar[bool] = True  # its per-partition calls go through engine.fanout (Ray tasks on Ray)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        root = Path(self.out)
        files = [root / d for d in self.edge_dirs]  # each a shuffle directory with columns a and b
        rel = f"_work/{self.name}/components"
        meter = cc.Meter()
        parts = cc.connected_components(files, self._keys, staging / rel, partition_edges=self.partition_edges,
                                        meter=meter)
        return UnitResult(data=as_data(Partitioned(rel, parts), rounds=meter.rounds, held=meter.held, calls=meter.calls,
                                       processes=meter.processes))

    def _keys(self, nodes: np.ndarray) -> np.ndarray:
        out = np.zeros(len(nodes), dtype=np.float64)
        units = cm.unit_of(nodes)
        for u in np.unique(units).tolist():
            sel = units == u
            prio = segments.load_npy(Path(self.out) / self.sig_dirs[u] / "prio.npy")
            out[sel] = prio[cm.row_of(nodes[sel])]
        return out


def unit_labels(work: Path, parts: int, unit_index: int) -> np.ndarray:
    """The ``LABEL`` records of one upstream unit's clustered rows, sorted by node."""
    lo, hi = np.int64(unit_index) << cm.ROW_BITS, np.int64(unit_index + 1) << cm.ROW_BITS
    pieces = []
    for p in range(parts):
        labels = np.load(work / f"labels-{p:05d}.npy", mmap_mode="r")
        i, j = np.searchsorted(labels["node"], [lo, hi])
        pieces.append(np.array(labels[i:j]))
    got = np.concatenate(pieces) if pieces else np.zeros(0, dtype=cc.LABEL)
    return got[np.argsort(got["node"], kind="stable")]


@dataclass(frozen=True)
class ApplyTask:
    output: ClassVar[type] = Documents  # what its units hand on, checked at commit (engine/outputs.py)
    step: MinHashDedup
    out: str
    comp_dir: str
    partitions: int

    @property
    def segments(self) -> tuple[str, ...]:  # its documents are an intermediate (base/segments.py)
        return (f"steps/{self.step.name}/docs",)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        part: cm.DocsPart = unit.payload
        table = cm.read_docs(Path(self.out), part)
        work = Path(self.out) / self.comp_dir
        labels = unit_labels(work, self.partitions, unit.index)
        rows = cm.row_of(labels["node"])
        cluster = np.full(table.num_rows, -1, dtype=np.int64)
        size = np.ones(table.num_rows, dtype=np.int64)
        cluster[rows] = labels["id"]
        size[rows] = cc.lookup_sizes(work, self.partitions, labels["id"])
        dup = np.zeros(table.num_rows, dtype=bool)
        dup[rows] = labels["id"] != labels["node"]
        why = reason(self.step, "duplicate")
        decision = cm.Decision(columns={column(self.step, "cluster"): cluster,
                                        column(self.step, "cluster_size"): size},
                               reasons=[why if d else None for d in dup.tolist()])
        return cm.write_documents(staging, self.step.name, part, table, decision)
