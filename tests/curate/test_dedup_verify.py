"""MinHash's exact-Jaccard check on clustered data: it reads the shingle sets the signatures stage stored, not
the texts, and keeps exactly the candidates a full check with :func:`jaccard` keeps, so the removed set is
the one the components of those pairs give."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from dedupkit import edited, ledger, random_text, source_stage, split_units, tree

from tokenmill.base import segments
from tokenmill.curate.dedup import common as cm
from tokenmill.curate.dedup.minhash import MinHashDedup, read_sets
from tokenmill.curate.dedup.shingles import jaccard, shingle_sets
from tokenmill.engine import LocalExecutor, run_workflow

UNITS = 4


def clustered_corpus(seed: int) -> list[str]:
    """Big clusters of near-copies, chains whose ends are far apart, pairs just below the threshold, and
    unrelated documents, shuffled so every cluster spans the units."""
    rng = random.Random(seed)
    texts = []
    for _ in range(3):  # big clusters: 14 near-copies of one page each
        page = random_text(rng, 200)
        texts += [page] + [edited(rng, page, 0.01) for _ in range(13)]
    for _ in range(2):  # chains: each link a light edit of the one before
        link = random_text(rng, 200)
        for _ in range(7):
            texts.append(link)
            link = edited(rng, link, 0.015)
    for _ in range(6):  # pairs near the threshold, on either side
        page = random_text(rng, 200)
        texts += [page, edited(rng, page, 0.02), edited(rng, page, 0.035)]
    texts += [random_text(rng, 200) for _ in range(20)]
    rng.shuffle(texts)
    return texts


def _edges(directory: Path) -> set[tuple[int, int]]:
    pairs = set()
    for rel in segments.listing(directory):  # each unit's parts.bin, in the stage's segment files
        d = directory / Path(rel).parent
        pairs |= set(zip(cm.read_column(d, "a").tolist(), cm.read_column(d, "b").tolist()))
    return pairs


def _blank_texts(docs: Path) -> dict[Path, bytes]:
    """Replace every text of the upstream documents by an empty one; returns the files' bytes to restore."""
    saved = {}
    for p in sorted(docs.glob("*.parquet")):
        saved[p] = p.read_bytes()
        table = pq.read_table(p)
        blank = pa.array([""] * table.num_rows, table.schema.field("text").type)
        pq.write_table(table.set_column(table.column_names.index("text"), "text", blank), p)
    return saved


def _components(nodes: int, edges: set[tuple[int, int]]) -> list[int]:
    """The smallest member of each node's component (union-find)."""
    parent = list(range(nodes))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in edges:
        rx, ry = find(x), find(y)
        parent[max(rx, ry)] = min(rx, ry)
    return [find(x) for x in range(nodes)]


def test_check_reads_stored_shingle_sets_and_keeps_what_the_full_check_keeps(tmp_path):
    texts = clustered_corpus(0)
    units = split_units(texts, UNITS)
    size = len(units[0])
    step = MinHashDedup()
    stages = [source_stage(units), *step.stages("source")]
    out = tmp_path / "run"
    run = lambda upto: run_workflow(stages[:upto], out=out, fingerprint="test", executor=LocalExecutor(workers=1))
    run(3)  # source, signatures, buckets
    sets = shingle_sets(pa.array(texts), kind=step.shingle, n=step.ngram, normalize=step.normalize)
    for u, unit in enumerate(units):  # the stored sets are shingle_sets', row by row
        stored, offsets = read_sets(out / "_work" / step.name / "sets" / f"unit-{u:06d}.sets")
        assert len(offsets) == len(unit) + 1
        for row in range(len(unit)):
            assert np.array_equal(stored[offsets[row]:offsets[row + 1]], sets[u * size + row])
    candidates = _edges(out / "_work" / step.name / "buckets")
    saved = _blank_texts(out / "source" / "docs")  # the check must not need them
    run(4)
    verified = _edges(out / "_work" / step.name / "verified")
    for p, raw in saved.items():
        p.write_bytes(raw)
    results = run(len(stages))

    index = lambda node: cm.unit_of(np.int64(node)) * size + cm.row_of(np.int64(node))
    sims = {(a, b): jaccard(sets[index(a)], sets[index(b)]) for a, b in candidates}
    full = {pair for pair, s in sims.items() if s >= step.threshold}
    below = [s for s in sims.values() if s < step.threshold]
    assert len(full) >= 40 and len(below) >= 3 and max(below) >= 0.7  # clusters, and pairs just below
    assert {cm.unit_of(np.int64(a)) != cm.unit_of(np.int64(b)) for a, b in full} == {True, False}
    assert verified == full

    label = _components(len(texts), {(int(index(a)), int(index(b))) for a, b in full})
    kept = ledger(out, results, step).column("kept").to_pylist()
    assert kept == [label[i] == i for i in range(len(texts))]  # the earliest document of each cluster survives
    assert sum(not k for k in kept) >= 40
    assert not (out / "_work" / step.name / "sets").exists()  # dropped once the check has run

    again = tmp_path / "again"  # a run that never had its texts blanked: the same bytes
    run_workflow(stages, out=again, fingerprint="test", executor=LocalExecutor(workers=2))
    assert tree(again) == tree(out)


def test_without_the_check_no_shingle_sets_are_stored(tmp_path):
    step = MinHashDedup(verify=False)
    results = run_workflow([source_stage(split_units(clustered_corpus(1), 2)), *step.stages("source")], out=tmp_path,
                           fingerprint="test", executor=LocalExecutor(workers=1))
    assert all("sets" not in r.data for r in results[f"{step.name}.signatures"])
    assert not (tmp_path / "_work" / step.name / "sets").exists()
