"""Connected components of a graph on disk, in memory bounded by ``partition_edges``.

The graph is a list of edges between 64-bit node ids (documents), in ``.npy`` files (arrays ``a`` and
``b``). Every node gets the *best* node of its component as its label, best meaning the smallest
``(key, id)`` pair, where ``key(node)`` is a float given by the caller (the survivor priority): the label is
at once the cluster id and its representative. Below, ``u < v`` compares nodes by that pair.

Algorithm (Large-Star / Small-Star, Kiveris et al. 2014, "Connected Components in MapReduce and Beyond",
over partitions of the edge list):

1. *Partition.* Edges are read in chunks of at most ``partition_edges`` rows and appended, in both
   directions and with the keys of both ends, to ``P = ceil(2E / partition_edges)`` spill files per edge
   file, by the hash range of their source node (``edges-g0000-<file>-<p>.bin``): a node's whole
   neighbourhood lies in its partition.
2. *Nodes.* Each partition writes its nodes (the distinct sources) with their own keys.
3. *Step.* Each partition reads its edges twice. First pass: ``m(u)``, the smallest of ``u`` and its
   neighbours, for each of its nodes. Second pass: a Large-Star step (even rounds) replaces each edge
   ``(u, v)`` with ``v > u`` by ``{v, m(u)}``; a Small-Star step (odd rounds) replaces each edge with
   ``v < u`` by ``{v, m(u)}`` (``{u, m(u)}`` when ``v`` is ``m(u)``). The new edges, both directions, go to
   the next generation's spill files by the partition of their source. Connectivity is kept, no edge
   count grows, and the graph converges to one star per component whose centre is its smallest node.
   The second pass also counts the edges ``(u, v)`` with ``m(u) != u`` and ``v != m(u)``: when no partition
   has one, every component is such a star, ``m(u)`` is the label of every node (written as
   ``labels-r<k>-<p>.npy``), and the loop stops.
4. *Sizes.* Each partition writes ``(label, 1)`` by the label's hash range; per range, the counts per label
   are summed (``np.unique``) and written sorted, for lookups by binary search.

Memory: one partition's nodes (the nodes whose hash falls in its range: about ``partition_edges / 2``), 25
bytes each, and one chunk of at most ``partition_edges / 8`` edge records (32 bytes: both ends and their
keys) with the at most twice as many records it emits and their sort: about ``40 * partition_edges`` bytes
plus the sizes of the largest range of step 4 (``clusters / P`` labels).
Distribution: each phase (1, 2, a step, the two halves of 4) is one call per edge file or per partition
through :func:`~tokenmill.engine.fanout.fan_out`; on the Ray executor the calls of a phase run as Ray tasks
across the cluster, each holding the memory above, so ``partition_edges`` bounds the memory of every
worker, not the corpus. Only the loop (a list of P counts per step) stays in the unit.
Time: ``O(E)`` sequential I/O per step (two reads, one write of the current edges); steps =
``O(log^2 n)`` of the largest component's ``n`` nodes (Kiveris et al., Theorem 1), whatever its diameter:
a chain of 200 converges in about 2 log2 200 steps, where min-label propagation took 200 rounds. The
labels are the same whatever the chunking, the number of partitions or the order of the input files: the
label of a node is a function of its component alone; so is the number of steps (each step is a function
of the edge set).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from tokenmill.curate.dedup.common import mix64, n_partitions, partition_of, read_column
from tokenmill.engine.fanout import fan_out

EDGE = np.dtype([("skey", "<f8"), ("src", "<i8"), ("dkey", "<f8"), ("dst", "<i8")])
LABEL = np.dtype([("node", "<i8"), ("key", "<f8"), ("id", "<i8"), ("changed", "?")])


@dataclass
class Meter:
    """The most rows held at once, by kind: what a test of the memory bound checks."""

    held: dict[str, int] = field(default_factory=dict)
    rounds: int = 0  # steps run (the last one finds the graph settled)
    calls: int = 0  # per-partition calls made (fan_out)
    processes: list[int] = field(default_factory=list)  # the processes that ran them

    def see(self, kind: str, n: int) -> None:
        self.held[kind] = max(self.held.get(kind, 0), int(n))


def node_partition(ids: np.ndarray, parts: int) -> np.ndarray:
    return partition_of(mix64(ids.astype(np.uint64)), parts)


def _append(path: Path, records: np.ndarray) -> None:
    with open(path, "ab") as fh:
        records.tofile(fh)


def _chunks(path: Path, dtype: np.dtype, rows: int):
    if not path.exists():
        return
    total = path.stat().st_size // dtype.itemsize
    for lo in range(0, total, rows):
        yield np.fromfile(path, dtype=dtype, count=min(rows, total - lo), offset=lo * dtype.itemsize)


def _spill(records: np.ndarray, part: np.ndarray, parts: int, work: Path, prefix: str) -> None:
    order = np.argsort(part, kind="stable")
    records, part = records[order], part[order]
    bounds = np.searchsorted(part, np.arange(parts + 1))
    for p in range(parts):
        if bounds[p + 1] > bounds[p]:
            _append(work / f"{prefix}-{p:05d}.bin", records[bounds[p]:bounds[p + 1]])


def _first_per(keys: Sequence[np.ndarray], group: np.ndarray) -> np.ndarray:
    """Index of the smallest row (by ``keys``, last key first) of each run of equal ``group``."""
    order = np.lexsort((*keys, group))
    g = group[order]
    return order[np.concatenate([[True], g[1:] != g[:-1]])] if len(g) else order


def _less(key_a: np.ndarray, id_a: np.ndarray, key_b: np.ndarray, id_b: np.ndarray) -> np.ndarray:
    """``(key_a, id_a) < (key_b, id_b)``, row by row."""
    return (key_a < key_b) | ((key_a == key_b) & (id_a < id_b))


@dataclass(frozen=True)
class _Layout:
    """Where the calls of one run read and write: ``work``, ``parts`` partitions, chunks of ``rows``."""

    work: Path
    parts: int
    rows: int

    @property
    def chunk(self) -> int:
        """Edge records read at once: an eighth of ``rows``, as each is 32 bytes and a step's call holds
        the twice as many records it may emit and their sort besides."""
        return max(2, self.rows // 8)

    def files(self, prefix: str, q: int) -> list[Path]:
        """Every source's spill file for partition ``q`` (``<prefix>-<source>-<q>.bin``), in source order."""
        return sorted(self.work.glob(f"{prefix}-*-{q:05d}.bin"))

    def nodes(self, p: int) -> Path:
        return self.work / f"nodes-{p:05d}.npy"

    def labels(self, rnd: int, p: int) -> Path:
        return self.work / f"labels-r{rnd:04d}-{p:05d}.npy"


def _gen(rnd: int) -> str:
    """The spill-file prefix of the edges that step ``rnd`` reads."""
    return f"edges-g{rnd:04d}"


Edges = tuple[Path, Path] | Path  # a pair of .npy files (the two ends), or a shuffle directory's a and b columns


def edge_columns(edges: Edges) -> tuple[np.ndarray, np.ndarray]:
    """The two ends of one edge file, memory-mapped: ``(a.npy, b.npy)``, or the ``a`` and ``b`` columns of a
    shuffle directory (:func:`~tokenmill.curate.dedup.common.write_partitioned`)."""
    if isinstance(edges, tuple):
        return np.load(edges[0], mmap_mode="r"), np.load(edges[1], mmap_mode="r")
    return read_column(edges, "a"), read_column(edges, "b")


def connected_components(edge_files: Sequence[Edges], key_of: Callable[[np.ndarray], np.ndarray],
                         work: Path, *, partition_edges: int, meter: Meter | None = None) -> int:
    """Label every node of the edges under ``work``; return the number of partitions ``P``.

    Writes ``labels-<p>.npy`` (``LABEL`` records sorted by node) and ``sizes-<q>.npy`` (label ids sorted,
    with ``counts-<q>.npy``) for ``p, q < P``; read them back with :func:`labels` and :func:`sizes`.

    Every phase is one call per edge file or per partition through
    :func:`~tokenmill.engine.fanout.fan_out`: in this process on the local engine, as Ray tasks on a
    cluster. A call holds what the module docstring says, writes whole files named after its source and
    target partitions, and edges and labels are double-buffered by step, so a call run twice leaves the
    same files.
    """
    meter = meter or Meter()
    work.mkdir(parents=True, exist_ok=True)
    total = sum(len(edge_columns(e)[0]) for e in edge_files)
    at = _Layout(work, n_partitions(2 * total, partition_edges), partition_edges)
    _seen(meter, fan_out(partial(_partition_edges, at, key_of), list(enumerate(edge_files))))
    _seen(meter, fan_out(partial(_init_nodes, at, key_of), range(at.parts)))
    most = 8 * (2 * total + 2).bit_length() ** 2 + 16  # far above Kiveris et al.'s O(log^2 n): a stuck loop
    rnd = 0
    while True:
        got = fan_out(partial(_star, at, rnd), range(at.parts))
        _seen(meter, got)
        meter.rounds += 1
        _remove(work, f"{_gen(rnd)}-*.bin", f"labels-r{rnd - 1:04d}-*.npy")
        if not any(g["unsettled"] for g in got):
            break
        rnd += 1
        if rnd > most:
            raise RuntimeError(f"connected components: not settled after {rnd} steps over {total:,} edges; "
                               "the graph should settle in O(log^2 n) steps, please report this")
    _remove(work, "edges-g*.bin")
    for p in range(at.parts):
        at.labels(rnd, p).replace(work / f"labels-{p:05d}.npy")
    _seen(meter, fan_out(partial(_members, at), range(at.parts)))
    _seen(meter, fan_out(partial(_count, at), range(at.parts)))
    _remove(work, "members-*.bin", "nodes-*.npy")
    meter.processes = sorted(set(meter.processes))
    return at.parts


def _seen(meter: Meter, reports: Sequence[dict]) -> None:
    for r in reports:
        for kind, n in r.get("held", {}).items():
            meter.see(kind, n)
        meter.processes.append(r["pid"])
        meter.calls += 1


def _remove(work: Path, *patterns: str) -> None:
    for pattern in patterns:
        for path in work.glob(pattern):
            path.unlink(missing_ok=True)


def _report(held: dict[str, int], **extra) -> dict:
    return {"held": held, "pid": os.getpid(), **extra}


def _fresh(at: _Layout, prefix: str, source: int) -> None:
    """Remove what an earlier attempt of this source's call left (its spill files)."""
    _remove(at.work, f"{prefix}-{source:05d}-*.bin")


def _edges(src: np.ndarray, skey: np.ndarray, dst: np.ndarray, dkey: np.ndarray) -> np.ndarray:
    """``EDGE`` records of the edges ``src``-``dst`` in both directions."""
    n = len(src)
    rec = np.empty(2 * n, dtype=EDGE)
    for lo, (s, sk, d, dk) in ((0, (src, skey, dst, dkey)), (n, (dst, dkey, src, skey))):
        rec["src"][lo:lo + n], rec["skey"][lo:lo + n], rec["dst"][lo:lo + n], rec["dkey"][lo:lo + n] = s, sk, d, dk
    return rec


def _partition_edges(at: _Layout, key_of, item: tuple[int, Edges]) -> dict:
    f, edges = item
    _fresh(at, _gen(0), f)
    held: dict[str, int] = {}
    step = at.chunk // 2
    a, b = edge_columns(edges)
    for lo in range(0, len(a), step):
        ca, cb = np.array(a[lo:lo + step]), np.array(b[lo:lo + step])
        rec = _edges(ca, key_of(ca) if len(ca) else np.zeros(0), cb, key_of(cb) if len(cb) else np.zeros(0))
        _most(held, "edges", len(rec))
        _spill(rec, node_partition(rec["src"], at.parts), at.parts, at.work, f"{_gen(0)}-{f:05d}")
    return _report(held)


def _most(held: dict[str, int], kind: str, n: int) -> None:
    held[kind] = max(held.get(kind, 0), int(n))


def _chunks_of(paths: Sequence[Path], dtype: np.dtype, rows: int):
    for path in paths:
        yield from _chunks(path, dtype, rows)


def _init_nodes(at: _Layout, key_of, p: int) -> dict:
    """Partition ``p``'s nodes (a self-loop's too), each labelled by itself, with its own key."""
    held: dict[str, int] = {}
    nodes = np.zeros(0, dtype=np.int64)
    for chunk in _chunks_of(at.files(_gen(0), p), EDGE, at.chunk):
        _most(held, "edges", len(chunk))
        nodes = np.union1d(nodes, chunk["src"])
    labels = np.zeros(len(nodes), dtype=LABEL)
    labels["node"], labels["id"] = nodes, nodes
    labels["key"] = key_of(nodes) if len(nodes) else 0.0
    _most(held, "nodes", len(labels))
    np.save(at.nodes(p), labels)
    return _report(held)


def _star(at: _Layout, rnd: int, p: int) -> dict:
    """Step ``rnd`` of partition ``p``: Large-Star when even, Small-Star when odd (module docstring, 3)."""
    _fresh(at, _gen(rnd + 1), p)
    labels = np.load(at.nodes(p))
    held = {"nodes": len(labels)}
    for chunk in _chunks_of(at.files(_gen(rnd), p), EDGE, at.chunk):
        _most(held, "edges", len(chunk))
        first = _first_per((chunk["dst"], chunk["dkey"]), chunk["src"])
        key, dst = chunk["dkey"][first], chunk["dst"][first]
        at_ = np.searchsorted(labels["node"], chunk["src"][first])
        better = _less(key, dst, labels["key"][at_], labels["id"][at_])
        at_ = at_[better]
        labels["key"][at_], labels["id"][at_] = key[better], dst[better]
    np.save(at.labels(rnd, p), labels)
    unsettled = 0
    for chunk in _chunks_of(at.files(_gen(rnd), p), EDGE, at.chunk):
        at_ = np.searchsorted(labels["node"], chunk["src"])
        src, dst, m_id = chunk["src"], chunk["dst"], labels["id"][at_]
        unsettled += int(((m_id != src) & (dst != m_id) & (dst != src)).sum())
        if rnd % 2 == 0:  # Large-Star: each larger neighbour v of u joins m(u)
            live = _less(chunk["skey"], src, chunk["dkey"], dst)
            okey, oid = chunk["dkey"][live], dst[live]
        else:  # Small-Star: each smaller neighbour v of u joins m(u); v = m(u) is replaced by u
            live = _less(chunk["dkey"], dst, chunk["skey"], src)
            is_m = (dst == m_id)[live]
            okey = np.where(is_m, chunk["skey"][live], chunk["dkey"][live])
            oid = np.where(is_m, src[live], dst[live])
        at_ = at_[live]
        rec = _edges(oid, okey, labels["id"][at_], labels["key"][at_])
        del at_, okey, oid, live, m_id
        _most(held, "messages", len(rec))
        _emit(at, rec, f"{_gen(rnd + 1)}-{p:05d}")
    return _report(held, unsettled=unsettled)


def _emit(at: _Layout, rec: np.ndarray, prefix: str) -> None:
    """Append the distinct edges of ``rec`` to ``<prefix>-<q>.bin`` by their source's partition ``q``."""
    part = node_partition(rec["src"], at.parts)
    order = np.lexsort((rec["dst"], rec["src"], part))
    src, dst = rec["src"][order], rec["dst"][order]
    keep = np.ones(len(order), dtype=bool)
    keep[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    del src, dst
    order = order[keep]
    rec, part = rec[order], part[order]
    bounds = np.searchsorted(part, np.arange(at.parts + 1))
    for q in range(at.parts):
        if bounds[q + 1] > bounds[q]:
            _append(at.work / f"{prefix}-{q:05d}.bin", rec[bounds[q]:bounds[q + 1]])

def _members(at: _Layout, p: int) -> dict:
    """One ``(label)`` row per node of partition ``p``, spilled by the label's partition."""
    _fresh(at, "members", p)
    ids = np.load(at.work / f"labels-{p:05d}.npy", mmap_mode="r")["id"]
    for lo in range(0, len(ids), at.rows):
        chunk = np.array(ids[lo:lo + at.rows])
        _spill(chunk, node_partition(chunk, at.parts), at.parts, at.work, f"members-{p:05d}")
    return _report({})


def _count(at: _Layout, q: int) -> dict:
    """The size of every cluster whose label falls in partition ``q``, sorted by label."""
    held: dict[str, int] = {}
    ids, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for chunk in _chunks_of(at.files("members", q), np.dtype("<i8"), at.rows):
        u, c = np.unique(chunk, return_counts=True)
        ids, inv = np.unique(np.concatenate([ids, u]), return_inverse=True)
        counts = np.bincount(inv, weights=np.concatenate([counts, c]), minlength=len(ids)).astype(np.int64)
        _most(held, "clusters", len(ids))
    np.save(at.work / f"sizes-{q:05d}.npy", ids)
    np.save(at.work / f"counts-{q:05d}.npy", counts)
    return _report(held)


def lookup_sizes(work: Path, parts: int, label_ids: np.ndarray) -> np.ndarray:
    """The component size of each label id (binary search in the memory-mapped size files)."""
    out = np.zeros(len(label_ids), dtype=np.int64)
    q_of = node_partition(label_ids, parts)
    for q in np.unique(q_of):
        sel = q_of == q
        ids = np.load(work / f"sizes-{q:05d}.npy", mmap_mode="r")
        counts = np.load(work / f"counts-{q:05d}.npy", mmap_mode="r")
        out[sel] = counts[np.searchsorted(ids, label_ids[sel])]
    return out


def clear(work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
