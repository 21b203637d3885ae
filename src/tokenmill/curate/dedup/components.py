"""Connected components of a graph on disk, in memory bounded by ``partition_edges``.

The graph is a list of edges between 64-bit node ids (documents), in ``.npy`` files (arrays ``a`` and
``b``). Every node gets the *best* node of its component as its label, best meaning the smallest
``(key, id)`` pair, where ``key(node)`` is a float given by the caller (the survivor priority): the label is
at once the cluster id and its representative.

Algorithm (min-label propagation over partitions, with a frontier):

1. *Partition.* Edges are read in chunks of at most ``partition_edges`` rows and appended, in both
   directions, to ``P = ceil(2E / partition_edges)`` spill files per edge file, by the hash range of their
   source node (``edges-<file>-<p>.bin``).
2. *Initialise.* For each partition, its nodes (the distinct sources) get their own ``(key, id)`` as label,
   all marked changed.
3. *Round.* For each partition, its edges are streamed in chunks; an edge whose source changed in the last
   round sends the source's label to its target; messages are reduced to one per target within the chunk
   and appended to ``msgs-<p>-<q>.bin`` by the target's partition ``q``. Then each partition's labels take
   the minimum of the messages received (written as the next round's ``labels-r<k>-<q>.npy``); the changed
   marks are reset to the nodes whose label went down. Repeat until no label moves.
4. *Sizes.* Each partition writes ``(label, 1)`` by the label's hash range; per range, the counts per label
   are summed (``np.unique``) and written sorted, for lookups by binary search.

Memory: one partition's labels (the nodes whose hash falls in its range: about ``partition_edges`` nodes)
and one chunk of at most ``partition_edges`` edges or messages, each a few arrays of 8 bytes per row: about
``40 * partition_edges`` bytes plus the sizes of the largest range of step 4 (``clusters / P`` labels).
Distribution: each phase (1, 2, the two halves of a round, the two halves of 4) is one call per edge file
or per partition through :func:`~tokenmill.engine.fanout.fan_out`; on the Ray executor the calls of a
phase run as Ray tasks across the cluster, each holding the memory above, so ``partition_edges`` bounds
the memory of every worker, not the corpus. Only the loop (a list of P booleans per round) stays in the
unit.
Time: ``O(E)`` sequential I/O per round; rounds = the largest component's diameter + 1 (the frontier makes
later rounds cheap). The result is the same whatever the chunking, the number of partitions or the order
of the input files: the label of a node is a function of its component alone.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from tokenmill.curate.dedup.common import mix64, n_partitions, partition_of
from tokenmill.engine.fanout import fan_out

EDGE = np.dtype([("src", "<i8"), ("dst", "<i8")])
MSG = np.dtype([("dst", "<i8"), ("key", "<f8"), ("id", "<i8")])
LABEL = np.dtype([("node", "<i8"), ("key", "<f8"), ("id", "<i8"), ("changed", "?")])


@dataclass
class Meter:
    """The most rows held at once, by kind: what a test of the memory bound checks."""

    held: dict[str, int] = field(default_factory=dict)
    rounds: int = 0
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


@dataclass(frozen=True)
class _Layout:
    """Where the calls of one run read and write: ``work``, ``parts`` partitions, chunks of ``rows``."""

    work: Path
    parts: int
    rows: int

    def files(self, prefix: str, q: int) -> list[Path]:
        """Every source's spill file for partition ``q`` (``<prefix>-<source>-<q>.bin``), in source order."""
        return sorted(self.work.glob(f"{prefix}-*-{q:05d}.bin"))

    def labels(self, rnd: int, p: int) -> Path:
        return self.work / f"labels-r{rnd:04d}-{p:05d}.npy"


def connected_components(edge_files: Sequence[tuple[Path, Path]], key_of: Callable[[np.ndarray], np.ndarray],
                         work: Path, *, partition_edges: int, meter: Meter | None = None) -> int:
    """Label every node of the edges under ``work``; return the number of partitions ``P``.

    Writes ``labels-<p>.npy`` (``LABEL`` records sorted by node) and ``sizes-<q>.npy`` (label ids sorted,
    with ``counts-<q>.npy``) for ``p, q < P``; read them back with :func:`labels` and :func:`sizes`.

    Every phase is one call per edge file or per partition through
    :func:`~tokenmill.engine.fanout.fan_out`: in this process on the local engine, as Ray tasks on a
    cluster. A call holds what the module docstring says, writes whole files named after its source and
    target partitions, and labels are double-buffered by round, so a call run twice leaves the same files.
    """
    meter = meter or Meter()
    work.mkdir(parents=True, exist_ok=True)
    total = sum(len(np.load(a, mmap_mode="r")) for a, _ in edge_files)
    at = _Layout(work, n_partitions(2 * total, partition_edges), partition_edges)
    _seen(meter, fan_out(partial(_partition_edges, at), list(enumerate(edge_files))))
    _seen(meter, fan_out(partial(_init_labels, at, key_of), range(at.parts)))
    rnd = 0
    while True:
        _seen(meter, fan_out(partial(_send, at, rnd), range(at.parts)))
        got = fan_out(partial(_receive, at, rnd), range(at.parts))
        _seen(meter, got)
        _remove(work, "msgs-*.bin", f"labels-r{rnd:04d}-*.npy")
        rnd += 1
        if not any(g["moved"] for g in got):
            break
        meter.rounds += 1
    for p in range(at.parts):
        at.labels(rnd, p).replace(work / f"labels-{p:05d}.npy")
    _seen(meter, fan_out(partial(_members, at), range(at.parts)))
    _seen(meter, fan_out(partial(_count, at), range(at.parts)))
    _remove(work, "edges-*.bin", "members-*.bin")
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


def _partition_edges(at: _Layout, item: tuple[int, tuple[Path, Path]]) -> dict:
    f, (a_path, b_path) = item
    _fresh(at, "edges", f)
    held: dict[str, int] = {}
    step = max(1, at.rows // 2)
    a, b = np.load(a_path, mmap_mode="r"), np.load(b_path, mmap_mode="r")
    for lo in range(0, len(a), step):
        ca, cb = np.array(a[lo:lo + step]), np.array(b[lo:lo + step])
        rec = np.empty(2 * len(ca), dtype=EDGE)
        rec["src"] = np.concatenate([ca, cb])
        rec["dst"] = np.concatenate([cb, ca])
        _most(held, "edges", len(rec))
        _spill(rec, node_partition(rec["src"], at.parts), at.parts, at.work, f"edges-{f:05d}")
    return _report(held)


def _most(held: dict[str, int], kind: str, n: int) -> None:
    held[kind] = max(held.get(kind, 0), int(n))


def _chunks_of(paths: Sequence[Path], dtype: np.dtype, rows: int):
    for path in paths:
        yield from _chunks(path, dtype, rows)


def _init_labels(at: _Layout, key_of, p: int) -> dict:
    held: dict[str, int] = {}
    nodes = np.zeros(0, dtype=np.int64)
    for chunk in _chunks_of(at.files("edges", p), EDGE, at.rows):
        _most(held, "edges", len(chunk))
        nodes = np.union1d(nodes, chunk["src"])
    labels = np.zeros(len(nodes), dtype=LABEL)
    labels["node"], labels["id"], labels["changed"] = nodes, nodes, True
    labels["key"] = key_of(nodes) if len(nodes) else 0.0
    _most(held, "nodes", len(labels))
    np.save(at.labels(0, p), labels)
    return _report(held)


def _send(at: _Layout, rnd: int, p: int) -> dict:
    """Partition ``p``'s changed labels along its edges, to ``msgs-<p>-<q>.bin`` by target partition."""
    _fresh(at, "msgs", p)
    labels = np.load(at.labels(rnd, p))
    held = {"nodes": len(labels)}
    if not labels["changed"].any():
        return _report(held)
    for chunk in _chunks_of(at.files("edges", p), EDGE, at.rows):
        _most(held, "edges", len(chunk))
        src = labels[np.searchsorted(labels["node"], chunk["src"])]
        live = src["changed"]
        msg = np.empty(int(live.sum()), dtype=MSG)
        msg["dst"], msg["key"], msg["id"] = chunk["dst"][live], src["key"][live], src["id"][live]
        msg = msg[_first_per((msg["id"], msg["key"]), msg["dst"])]
        _spill(msg, node_partition(msg["dst"], at.parts), at.parts, at.work, f"msgs-{p:05d}")
    return _report(held)


def _receive(at: _Layout, rnd: int, q: int) -> dict:
    """Partition ``q``'s labels of round ``rnd + 1``: the smallest of its labels and messages."""
    labels = np.load(at.labels(rnd, q))
    labels["changed"] = False
    held: dict[str, int] = {}
    for msg in _chunks_of(at.files("msgs", q), MSG, at.rows):
        _most(held, "messages", len(msg))
        msg = msg[_first_per((msg["id"], msg["key"]), msg["dst"])]
        at_ = np.searchsorted(labels["node"], msg["dst"])
        cur = labels[at_]
        better = (msg["key"] < cur["key"]) | ((msg["key"] == cur["key"]) & (msg["id"] < cur["id"]))
        at_ = at_[better]
        labels["key"][at_], labels["id"][at_], labels["changed"][at_] = msg["key"][better], msg["id"][better], True
    np.save(at.labels(rnd + 1, q), labels)
    return _report(held, moved=bool(labels["changed"].any()))


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
