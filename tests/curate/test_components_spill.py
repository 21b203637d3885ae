"""Connected components spilled to disk in many small partitions give the components of one partition held in
memory and of a union-find, on random graphs with long chains and stars, in steps that grow with the log of
the component's size, not its diameter, and the same files whether the per-partition calls run in one
process or in two worker processes."""

from __future__ import annotations

import math
import multiprocessing

import numpy as np
import pytest

from tokenmill.curate.dedup.components import Meter, connected_components
from tokenmill.engine import fanout


def key_of(nodes: np.ndarray) -> np.ndarray:
    """Survivor keys with many ties (a module function: the worker processes unpickle it by name)."""
    return ((nodes * 2654435761) % 5).astype(np.float64)


def _graph(seed: int, shape: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.choice(1 << 40, size=600, replace=False).astype(np.int64)  # sparse ids, unordered
    if shape == "random":
        a, b = rng.integers(0, 600, 500), rng.integers(0, 600, 500)
    elif shape == "chain":  # one path through 150 nodes in random id order, plus a short one
        order = rng.permutation(150)
        a, b = np.concatenate([order[:-1], [450, 451]]), np.concatenate([order[1:], [451, 452]])
    elif shape == "stars":  # hubs with many leaves, two hubs joined, a leaf shared by two stars
        a = np.concatenate([np.full(200, 0), np.full(150, 1), np.full(100, 2), [0, 300]])
        b = np.concatenate([np.arange(3, 203), np.arange(203, 353), np.arange(353, 453), [1, 2]])
    elif shape == "starchain":  # a chain whose nodes head stars (what defeated pointer jumping)
        hubs = rng.permutation(100) * 6
        leaves = np.repeat(hubs, 5) + np.tile(np.arange(1, 6), 100)
        ids = np.sort(ids)[::-1].copy()  # a leaf's id (hub + 1..5) is smaller than its hub's
        a, b = np.concatenate([hubs[:-1], np.repeat(hubs, 5)]), np.concatenate([hubs[1:], leaves])
    else:  # mixed: a chain whose nodes are star hubs, random edges, self-loops and repeated edges
        chain = rng.permutation(100)
        a = np.concatenate([chain[:-1], np.repeat(chain[::10], 20), rng.integers(0, 600, 100), [7, 7, 9]])
        b = np.concatenate([chain[1:], rng.integers(100, 600, 200), rng.integers(0, 600, 100), [7, 8, 8]])
    return ids[a], ids[b]


def _union_find(a: np.ndarray, b: np.ndarray) -> dict[int, tuple[float, int]]:
    """Each node's best ``(key, id)`` of its component, by a union-find in memory."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in zip(a.tolist(), b.tolist()):
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[rx] = ry
    nodes = np.array(sorted(parent), dtype=np.int64)
    keys = dict(zip(nodes.tolist(), key_of(nodes).tolist()))
    best: dict[int, tuple[float, int]] = {}
    for n in nodes.tolist():
        r = find(n)
        best[r] = min(best.get(r, (keys[n], n)), (keys[n], n))
    return {n: best[find(n)] for n in nodes.tolist()}


def _write(tmp_path, a, b, files=3):
    out = []
    for k, part in enumerate(np.array_split(np.arange(len(a)), files)):
        out.append((tmp_path / f"a{k}.npy", tmp_path / f"b{k}.npy"))
        np.save(out[-1][0], a[part])
        np.save(out[-1][1], b[part])
    return out


def _result(work, parts):
    labels = np.concatenate([np.load(work / f"labels-{p:05d}.npy") for p in range(parts)])
    got = {int(n): (float(k), int(i)) for n, k, i in zip(labels["node"], labels["key"], labels["id"])}
    sizes = {}
    for q in range(parts):
        sizes.update(zip(np.load(work / f"sizes-{q:05d}.npy").tolist(), np.load(work / f"counts-{q:05d}.npy").tolist()))
    return got, sizes


def _files(work, parts):
    return b"".join((work / f"{kind}-{p:05d}.npy").read_bytes() for kind in ("labels", "sizes", "counts")
                    for p in range(parts))


@pytest.mark.parametrize("shape", ["random", "chain", "stars", "starchain", "mixed"])
@pytest.mark.parametrize("seed", [0, 1])
def test_spilled_components_equal_in_memory_and_union_find(tmp_path, shape, seed):
    a, b = _graph(seed, shape)
    edges = _write(tmp_path, a, b)
    whole = connected_components(edges, key_of, tmp_path / "memory", partition_edges=10**6)
    meter = Meter()
    parts = connected_components(edges, key_of, tmp_path / "spilled", partition_edges=80, meter=meter)
    assert whole == 1 and parts >= 4 and max(meter.held.values()) <= 80
    truth = _union_find(a, b)
    labels, sizes = _result(tmp_path / "spilled", parts)
    assert labels == truth and _result(tmp_path / "memory", 1) == (labels, sizes)
    expected_sizes: dict[int, int] = {}
    for _, label in truth.values():
        expected_sizes[label] = expected_sizes.get(label, 0) + 1
    assert sizes == expected_sizes
    assert not list((tmp_path / "spilled").glob("*.bin"))  # the spill files are gone


def _big(shape: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A chain of ``n`` nodes (ids ascending, descending or shuffled), a chain of ``n // 6`` hubs each heading
    five better leaves, or a random graph of ``n`` nodes and ``n`` edges."""
    rng = np.random.default_rng(n)
    if shape == "random":
        return rng.integers(0, n, n).astype(np.int64) * 3, rng.integers(0, n, n).astype(np.int64) * 3
    if shape == "starchain":
        hubs = rng.permutation(n // 6).astype(np.int64) * 6 + 5
        return (np.concatenate([hubs[:-1], np.repeat(hubs, 5)]),
                np.concatenate([hubs[1:], np.repeat(hubs, 5) - np.tile(np.arange(1, 6), len(hubs))]))
    order = {"up": np.arange(n), "down": np.arange(n)[::-1], "shuffled": rng.permutation(n)}[shape].astype(np.int64)
    return order[:-1] * 7 + 3, order[1:] * 7 + 3


@pytest.mark.parametrize("shape", ["up", "down", "shuffled", "starchain", "random"])
def test_steps_grow_with_the_log_of_the_component_not_its_diameter(tmp_path, shape):
    n = 1200
    a, b = _big(shape, n)
    meter = Meter()
    parts = connected_components(_write(tmp_path, a, b), key_of, tmp_path / "w", partition_edges=600, meter=meter)
    labels, sizes = _result(tmp_path / "w", parts)
    assert parts >= 4 and labels == _union_find(a, b)
    assert sum(sizes.values()) == len(labels) and max(sizes.values()) >= (n // 6 if shape != "random" else 2)
    assert 1 <= meter.rounds <= math.ceil(math.log2(n)) ** 2  # a chain's diameter is n - 1 (or n // 6 - 1)


@pytest.mark.parametrize("shape", ["mixed", "starchain"])
def test_one_or_two_worker_processes_write_the_same_files(tmp_path, shape):
    a, b = _graph(5, shape)
    edges = _write(tmp_path, a, b)
    one = connected_components(edges, key_of, tmp_path / "one", partition_edges=100)
    pids: list[int] = []
    with multiprocessing.get_context("fork").Pool(2) as pool:
        fanout.install(lambda fn, items: pool.map(fn, items, chunksize=1))
        try:
            meter = Meter()
            two = connected_components(edges, key_of, tmp_path / "two", partition_edges=100, meter=meter)
            pids = meter.processes
        finally:
            fanout.install(None)
    assert one == two > 4 and len(pids) == 2
    assert _files(tmp_path / "two", two) == _files(tmp_path / "one", one)
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())
