"""The connected components' per-partition calls (``engine.fanout``): a call run twice, as a retry after a
killed worker runs it, leaves the same labels; spread over calls the result equals the one-process result."""

from __future__ import annotations

import numpy as np

from tokenmill.curate.dedup.components import Meter, connected_components
from tokenmill.engine import fanout


def _graph(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 80, 120, dtype=np.int64) * 11 + 5
    b = rng.integers(0, 80, 120, dtype=np.int64) * 11 + 5
    for k, part in enumerate(np.array_split(np.arange(len(a)), 3)):
        np.save(tmp_path / f"a{k}.npy", a[part])
        np.save(tmp_path / f"b{k}.npy", b[part])
    return [(tmp_path / f"a{k}.npy", tmp_path / f"b{k}.npy") for k in range(3)]


def _labels(work, parts):
    return b"".join((work / f"{kind}-{p:05d}.npy").read_bytes() for kind in ("labels", "sizes", "counts")
                    for p in range(parts))


def _twice(fn, items):
    """Every call run twice, its first result thrown away: what a retry after a lost worker does."""
    out = []
    for item in items:
        fn(item)
        out.append(fn(item))
    return out


def test_calls_run_twice_leave_the_same_files(tmp_path):
    edges = _graph(tmp_path)
    key = lambda nodes: (nodes % 7).astype(np.float64)  # noqa: E731
    once = Meter()
    parts = connected_components(edges, key, tmp_path / "once", partition_edges=30, meter=once)
    fanout.install(_twice)
    try:
        again = Meter()
        assert connected_components(edges, key, tmp_path / "twice", partition_edges=30, meter=again) == parts > 2
    finally:
        fanout.install(None)
    assert _labels(tmp_path / "twice", parts) == _labels(tmp_path / "once", parts)
    assert again.rounds == once.rounds >= 1 and once.calls == again.calls > 4 * parts
    assert sorted(p.name for p in (tmp_path / "twice").iterdir()) == sorted(p.name for p in (tmp_path / "once").iterdir())
