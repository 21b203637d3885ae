"""Peak memory of the MinHash clustering stage (connected components on disk) per document.

    python benchmarks/components_memory.py [--docs 1e6 4e6 16e6] [--partition-edges 2000000] [--workdir DIR]

Graph. Synthetic, shaped like what the buckets stage writes: ``docs`` global ids (``unit << 32 | row``,
units of 100,000 rows); a third of the documents are near-duplicates, in clusters of geometric size (mean
about 4), each member joined to its cluster's first document (the bucket's centre) and, for one member in
four, to a second member (two bands that disagree on the centre), so components have diameter up to 3; and
one chain of ``--chain`` documents (20). Min-label propagation took the largest diameter plus one rounds
(a chain of 200 at 4 million documents: 125 rounds, 643 s on the loaded machine); the Large-Star /
Small-Star steps grow with the log of the largest component (BENCHMARKS.md). Edges are written as one
``a.npy``/``b.npy`` pair per 16 units (the verify stage writes one ``parts.bin`` with the same two columns per
unit; :func:`~tokenmill.curate.dedup.components.edge_columns` reads both).

Measurement. :func:`~tokenmill.curate.dedup.components.connected_components` runs in a fresh process (the
module imported, then the call) with ``partition_edges`` fixed, the priority of every document read from a
memory-mapped array as the components stage reads ``prio.npy``. Peak RSS is the process's high-water mark
(``VmHWM``), polled RSS besides. The fixed base is the same process on a graph of 1,000 documents; bytes
per document = (peak - base) / documents.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from common import machine, run_measured

UNIT_ROWS = 100_000
UNITS_PER_FILE = 16


def write_graph(docs: int, out: Path, seed: int = 0, chain: int = 20) -> dict:
    """Edge files of the synthetic graph over ``docs`` documents (see the module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n_dup = docs // 3
    sizes = rng.geometric(0.25, size=max(1, n_dup // 3))
    sizes = sizes[np.cumsum(sizes) <= n_dup]
    members = rng.permutation(docs)[: int(sizes.sum())]  # rows of the clustered documents, in random order
    cluster = np.repeat(np.arange(len(sizes)), sizes)
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    centre = members[start][cluster]
    a, b = members, centre
    extra = rng.random(len(members)) < 0.25
    a = np.concatenate([a, members[extra], np.arange(docs - chain, docs - 1)])
    b = np.concatenate([b, members[start[cluster] + rng.integers(0, 1 << 30, len(members)) % sizes[cluster]][extra],
                        np.arange(docs - chain + 1, docs)])
    keep = a != b
    a, b = _gid(a[keep]), _gid(b[keep])
    group = (np.maximum(a, b) >> 32) // UNITS_PER_FILE
    files = []
    for g in np.unique(group):
        sel = group == g
        files.append((out / f"a-{g:05d}.npy", out / f"b-{g:05d}.npy"))
        np.save(files[-1][0], a[sel])
        np.save(files[-1][1], b[sel])
    np.save(out / "prio.npy", np.zeros(docs, dtype=np.float64))
    return {"docs": docs, "edges": int(len(a)), "files": len(files)}


def _gid(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.int64)
    return ((rows // UNIT_ROWS) << 32) | (rows % UNIT_ROWS)


def child(graph: Path, work: Path, partition_edges: int, result: Path) -> None:
    """Run the components of ``graph`` in this process; write the timing and the high-water mark."""
    from tokenmill.curate.dedup.components import Meter, connected_components

    prio = np.load(graph / "prio.npy", mmap_mode="r")

    def key_of(nodes: np.ndarray) -> np.ndarray:
        rows = (nodes >> 32) * UNIT_ROWS + (nodes & 0xFFFFFFFF)
        return np.asarray(prio[rows], dtype=np.float64)

    files = [(a, graph / a.name.replace("a-", "b-")) for a in sorted(graph.glob("a-*.npy"))]
    base = _high_water_mb()
    meter = Meter()
    start = time.perf_counter()
    parts = connected_components(files, key_of, work, partition_edges=partition_edges, meter=meter)
    seconds = time.perf_counter() - start
    result.write_text(json.dumps({"seconds": seconds, "partitions": parts, "rounds": meter.rounds,
                                  "held": meter.held, "import_maxrss_mb": base, "maxrss_mb": _high_water_mb()}))


def _high_water_mb() -> float:
    """This process's peak RSS (``VmHWM``; ``ru_maxrss`` would carry the forking parent's peak over exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def measure(docs: int, root: Path, partition_edges: int, chain: int) -> dict:
    graph, work, result = root / f"graph-{docs}", root / f"work-{docs}", root / f"result-{docs}.json"
    info = write_graph(docs, graph, chain=chain)
    cmd = [sys.executable, __file__, "_child", str(graph), str(work), str(partition_edges), str(result)]
    m = run_measured(cmd, poll_s=0.2)
    if m["rc"] != 0:
        raise RuntimeError(m["stderr"][-3000:])
    out = {**info, **json.loads(result.read_text()), "polled_rss_mb": m["peak_rss_mb"], "wall_s": m["wall_s"]}
    shutil.rmtree(graph)
    shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=float, nargs="+", default=[1e6, 4e6, 16e6])
    ap.add_argument("--partition-edges", type=int, default=2_000_000)
    ap.add_argument("--chain", type=int, default=20)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="tokenmill-components-mem-"))
    root.mkdir(parents=True, exist_ok=True)
    base = measure(1000, root, args.partition_edges, args.chain)
    print(json.dumps({"machine": machine(), "load": os.getloadavg(), "base": base}), flush=True)
    runs = []
    for n in args.docs:
        r = measure(int(n), root, args.partition_edges, args.chain)
        r["bytes_per_doc"] = (r["maxrss_mb"] - base["maxrss_mb"]) * 2**20 / r["docs"]
        print(json.dumps(r), flush=True)
        runs.append(r)
    for small, big in zip(runs, runs[1:]):
        slope = (big["maxrss_mb"] - small["maxrss_mb"]) * 2**20 / (big["docs"] - small["docs"])
        print(json.dumps({"from": small["docs"], "to": big["docs"], "bytes_per_added_doc": slope}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
    else:
        main()
