"""Connected components of a graph on disk, in memory bounded by ``partition_edges``.

The graph is a list of edges between 64-bit node ids (documents), in ``.npy`` files (arrays ``a`` and
``b``). Every node gets the *best* node of its component as its label, best meaning the smallest
``(key, id)`` pair, where ``key(node)`` is a float given by the caller (the survivor priority): the label is
at once the cluster id and its representative.

Algorithm (min-label propagation over partitions, with a frontier):

1. *Partition.* Edges are read in chunks of at most ``partition_edges`` rows and appended, in both
   directions, to ``P = ceil(2E / partition_edges)`` spill files by the hash range of their source node.
2. *Initialise.* For each partition, its nodes (the distinct sources) get their own ``(key, id)`` as label,
   all marked changed.
3. *Round.* For each partition, its edges are streamed in chunks; an edge whose source changed in the last
   round sends the source's label to its target; messages are reduced to one per target within the chunk
   and appended to the target's partition. Then each partition's labels take the minimum of the messages
   received; the changed marks are reset to the nodes whose label went down. Repeat until no label moves.
4. *Sizes.* Each partition writes ``(label, 1)`` by the label's hash range; per range, the counts per label
   are summed (``np.unique``) and written sorted, for lookups by binary search.

Memory: one partition's labels (the nodes whose hash falls in its range: about ``partition_edges`` nodes)
and one chunk of at most ``partition_edges`` edges or messages, each a few arrays of 8 bytes per row: about
``40 * partition_edges`` bytes plus the sizes of the largest range of step 4 (``clusters / P`` labels).
Time: ``O(E)`` sequential I/O per round; rounds = the largest component's diameter + 1 (the frontier makes
later rounds cheap). The result is the same whatever the chunking, the number of partitions or the order
of the input files: the label of a node is a function of its component alone.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tokenmill.curate.dedup.common import mix64, n_partitions, partition_of

EDGE = np.dtype([("src", "<i8"), ("dst", "<i8")])
MSG = np.dtype([("dst", "<i8"), ("key", "<f8"), ("id", "<i8")])
LABEL = np.dtype([("node", "<i8"), ("key", "<f8"), ("id", "<i8"), ("changed", "?")])


@dataclass
class Meter:
    """The most rows held at once, by kind: what a test of the memory bound checks."""

    held: dict[str, int] = field(default_factory=dict)
    rounds: int = 0

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


def connected_components(edge_files: Sequence[tuple[Path, Path]], key_of: Callable[[np.ndarray], np.ndarray],
                         work: Path, *, partition_edges: int, meter: Meter | None = None) -> int:
    """Label every node of the edges under ``work``; return the number of partitions ``P``.

    Writes ``labels-<p>.npy`` (``LABEL`` records sorted by node) and ``sizes-<q>.npy`` (label ids sorted,
    with ``counts-<q>.npy``) for ``p, q < P``; read them back with :func:`labels` and :func:`sizes`.
    """
    meter = meter or Meter()
    work.mkdir(parents=True, exist_ok=True)
    total = sum(len(np.load(a, mmap_mode="r")) for a, _ in edge_files)
    parts = n_partitions(2 * total, partition_edges)
    _partition_edges(edge_files, work, parts, partition_edges, meter)
    for p in range(parts):
        _init_labels(work, p, key_of, partition_edges, meter)
    while _round(work, parts, partition_edges, meter):
        meter.rounds += 1
    _sizes(work, parts, partition_edges, meter)
    for p in range(parts):
        (work / f"edges-{p:05d}.bin").unlink(missing_ok=True)
    return parts


def _partition_edges(edge_files, work: Path, parts: int, rows: int, meter: Meter) -> None:
    step = max(1, rows // 2)
    for a_path, b_path in edge_files:
        a, b = np.load(a_path, mmap_mode="r"), np.load(b_path, mmap_mode="r")
        for lo in range(0, len(a), step):
            ca, cb = np.array(a[lo:lo + step]), np.array(b[lo:lo + step])
            rec = np.empty(2 * len(ca), dtype=EDGE)
            rec["src"] = np.concatenate([ca, cb])
            rec["dst"] = np.concatenate([cb, ca])
            meter.see("edges", len(rec))
            _spill(rec, node_partition(rec["src"], parts), parts, work, "edges")


def _init_labels(work: Path, p: int, key_of, rows: int, meter: Meter) -> None:
    nodes = np.zeros(0, dtype=np.int64)
    for chunk in _chunks(work / f"edges-{p:05d}.bin", EDGE, rows):
        meter.see("edges", len(chunk))
        nodes = np.union1d(nodes, chunk["src"])
    labels = np.zeros(len(nodes), dtype=LABEL)
    labels["node"], labels["id"], labels["changed"] = nodes, nodes, True
    labels["key"] = key_of(nodes) if len(nodes) else 0.0
    meter.see("nodes", len(labels))
    np.save(work / f"labels-{p:05d}.npy", labels)


def _round(work: Path, parts: int, rows: int, meter: Meter) -> bool:
    for p in range(parts):
        labels = np.load(work / f"labels-{p:05d}.npy")
        meter.see("nodes", len(labels))
        if not labels["changed"].any():
            continue
        for chunk in _chunks(work / f"edges-{p:05d}.bin", EDGE, rows):
            meter.see("edges", len(chunk))
            src = labels[np.searchsorted(labels["node"], chunk["src"])]
            live = src["changed"]
            msg = np.empty(int(live.sum()), dtype=MSG)
            msg["dst"], msg["key"], msg["id"] = chunk["dst"][live], src["key"][live], src["id"][live]
            msg = msg[_first_per((msg["id"], msg["key"]), msg["dst"])]
            _spill(msg, node_partition(msg["dst"], parts), parts, work, "msgs")
    moved = False
    for q in range(parts):
        moved |= _receive(work, q, rows, meter)
    return moved


def _receive(work: Path, q: int, rows: int, meter: Meter) -> bool:
    path = work / f"labels-{q:05d}.npy"
    labels = np.load(path)
    labels["changed"] = False
    msgs_path = work / f"msgs-{q:05d}.bin"
    for msg in _chunks(msgs_path, MSG, rows):
        meter.see("messages", len(msg))
        msg = msg[_first_per((msg["id"], msg["key"]), msg["dst"])]
        at = np.searchsorted(labels["node"], msg["dst"])
        cur = labels[at]
        better = (msg["key"] < cur["key"]) | ((msg["key"] == cur["key"]) & (msg["id"] < cur["id"]))
        at = at[better]
        labels["key"][at], labels["id"][at], labels["changed"][at] = msg["key"][better], msg["id"][better], True
    msgs_path.unlink(missing_ok=True)
    np.save(path, labels)
    return bool(labels["changed"].any())


def _sizes(work: Path, parts: int, rows: int, meter: Meter) -> None:
    for p in range(parts):
        ids = np.load(work / f"labels-{p:05d}.npy", mmap_mode="r")["id"]
        for lo in range(0, len(ids), rows):
            chunk = np.array(ids[lo:lo + rows])
            _spill(chunk, node_partition(chunk, parts), parts, work, "members")
    for q in range(parts):
        path = work / f"members-{q:05d}.bin"
        ids, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
        for chunk in _chunks(path, np.dtype("<i8"), rows):
            u, c = np.unique(chunk, return_counts=True)
            ids, inv = np.unique(np.concatenate([ids, u]), return_inverse=True)
            counts = np.bincount(inv, weights=np.concatenate([counts, c]), minlength=len(ids)).astype(np.int64)
            meter.see("clusters", len(ids))
        path.unlink(missing_ok=True)
        np.save(work / f"sizes-{q:05d}.npy", ids)
        np.save(work / f"counts-{q:05d}.npy", counts)


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
