"""MinHash dedup: precision and recall against exact Jaccard, bounded memory, determinism, resume, pickling."""

from __future__ import annotations

import itertools
import math
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from dedupkit import ledger, planted_corpus, run_step, split_units, survivors, tree

import statekit
from tokenmill.curate.dedup.components import Meter, connected_components
from tokenmill.curate.dedup.minhash import MinHashDedup
from tokenmill.curate.dedup.shingles import jaccard, shingle_sets
from tokenmill.errors import ConfigError
from tokenmill.steps.registry import step_class

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"


def _truth(texts: list[str], step: MinHashDedup) -> dict[tuple[int, int], float]:
    sets = shingle_sets(pa.array(texts), kind=step.shingle, n=step.ngram, normalize=step.normalize)
    return {(i, j): jaccard(sets[i], sets[j]) for i, j in itertools.combinations(range(len(texts)), 2)}


def test_jaccard_is_the_exact_share_of_shared_shingles():
    """Against Python's sets, on sorted unique uint64 arrays as shingle_sets makes them: empty, disjoint,
    equal, nested, hashes at both ends of the range, and random overlaps."""
    rng = np.random.default_rng(0)
    top = np.uint64(2**64 - 1)
    cases = [([], []), ([], [5]), ([1, 2], [3, 4]), ([7, 9], [7, 9]), ([1, 2, 3, 4], [2, 3]),
             ([0, int(top)], [int(top)]), ([5], [1, 2, 3])]
    for _ in range(200):
        pool = rng.integers(0, 2**64 - 1, size=int(rng.integers(1, 400)), dtype=np.uint64, endpoint=True)
        cases.append((rng.choice(pool, size=int(rng.integers(0, len(pool) + 1)), replace=False).tolist(),
                      rng.choice(pool, size=int(rng.integers(0, len(pool) + 1)), replace=False).tolist()))
    for x, y in cases:
        a, b = set(x), set(y)
        want = 1.0 if not a | b else len(a & b) / len(a | b)
        xs, ys = np.unique(np.array(x, dtype=np.uint64)), np.unique(np.array(y, dtype=np.uint64))
        assert jaccard(xs, ys) == jaccard(ys, xs) == want, (x, y)


def _flat_ledger(out, res, step):
    led = ledger(out, res, step).to_pydict()
    return led["kept"], led[f"{step.name}.cluster"]


def test_default_setting_finds_planted_near_duplicates_and_nothing_else(tmp_path):
    texts, planted = planted_corpus(0, 60)
    step = MinHashDedup()
    res = run_step(step, split_units(texts, 3), tmp_path)
    kept, cluster = _flat_ledger(tmp_path, res, step)
    truth = _truth(texts, step)
    positives = [p for p, s in truth.items() if s >= 0.8]
    assert len(positives) >= 25 and all(tuple(sorted(p)) in truth for p in planted)
    found = [p for p in positives if cluster[p[0]] != -1 and cluster[p[0]] == cluster[p[1]]]
    assert len(found) / len(positives) >= 0.98
    removed = [i for i, k in enumerate(kept) if not k]
    assert removed
    for i in removed:  # every removal has a true near-duplicate in its cluster
        mates = [j for j in range(len(texts)) if j != i and cluster[j] == cluster[i]]
        assert max(truth[tuple(sorted((i, j)))] for j in mates) >= 0.8
    for c in set(cluster) - {-1}:  # every cluster keeps exactly one document
        assert sum(1 for i, k in enumerate(kept) if k and cluster[i] == c) == 1


def test_without_verification_candidates_are_clustered_as_found(tmp_path):
    texts, planted = planted_corpus(1, 40)
    res = run_step(MinHashDedup(verify=False), split_units(texts, 2), tmp_path)
    assert "minhash_dedup.verify" not in res
    kept, cluster = _flat_ledger(tmp_path, res, MinHashDedup(verify=False))
    assert all(cluster[a] == cluster[b] != -1 for a, b in planted)
    assert sum(not k for k in kept) == len(planted)


def test_survivor_priority_longest_and_ledger_column(tmp_path):
    base = " ".join(f"word{i}" for i in range(60))
    units = [[base, base + " tail"], [base + " a longer tail here"]]
    res = run_step(MinHashDedup(keep="longest"), units, tmp_path / "l")
    assert survivors(tmp_path / "l", res, MinHashDedup()) == ["unit-000001:0"]
    step = MinHashDedup(keep="max:quality.score")
    res = run_step(step, units, tmp_path / "q", extra=[{"quality.score": [0.2, 0.9]}, {"quality.score": [0.5]}])
    assert survivors(tmp_path / "q", res, step) == ["unit-000000:1"]


def test_bounded_memory_same_result_as_unbounded(tmp_path):
    texts, _ = planted_corpus(2, 60)
    texts += [texts[0] + f" extra{i}" for i in range(12)]  # one big cluster
    units = split_units(texts, 3)
    bound = 25
    small = run_step(MinHashDedup(partition_edges=bound), units, tmp_path / "small")
    run_step(MinHashDedup(), units, tmp_path / "big")
    (comp,) = small["minhash_dedup.components"]
    assert comp.data["partitions"] > 3 and comp.data["rounds"] >= 1
    held = comp.data["held"]
    assert held["edges"] <= bound and held["messages"] <= bound and held["nodes"] <= 2 * bound
    assert max(r.data["entries_held"] for r in small["minhash_dedup.buckets"]) <= 2 * bound
    steps = lambda root: {k: v for k, v in tree(root).items() if k.startswith("steps/")}
    assert steps(tmp_path / "small") == steps(tmp_path / "big")


def test_components_of_a_long_chain_converge_in_small_partitions(tmp_path):
    n = 60
    a = np.arange(1, n, dtype=np.int64)
    b = a - 1
    rng = np.random.default_rng(0)
    perm = rng.permutation(n - 1)
    np.save(tmp_path / "a.npy", a[perm] * 7 + 3)
    np.save(tmp_path / "b.npy", b[perm] * 7 + 3)
    meter = Meter()
    parts = connected_components([(tmp_path / "a.npy", tmp_path / "b.npy")], lambda x: np.zeros(len(x)),
                                 tmp_path / "w", partition_edges=16, meter=meter)
    labels = np.concatenate([np.load(tmp_path / "w" / f"labels-{p:05d}.npy") for p in range(parts)])
    assert len(labels) == n and set(labels["id"].tolist()) == {3}
    assert meter.held["edges"] <= 16 and meter.held["messages"] <= 16
    assert 1 <= meter.rounds <= math.ceil(math.log2(n)) ** 2  # Large-Star / Small-Star, not the diameter n - 1


def test_one_or_two_workers_same_bytes(tmp_path):
    texts, _ = planted_corpus(3, 30)
    units = split_units(texts, 3)
    run_step(MinHashDedup(partition_edges=500), units, tmp_path / "one", workers=1)
    run_step(MinHashDedup(partition_edges=500), units, tmp_path / "two", workers=2)
    assert tree(tmp_path / "one") == tree(tmp_path / "two")


KILLER = r'''
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from dedupkit import planted_corpus, source_stage, split_units
from tokenmill.curate.dedup.minhash import MinHashDedup
from tokenmill.engine import run_workflow
from tokenmill.engine.local import commit_unit

KILL = sys.argv[3]

class KillingExecutor:
    """Commits the first unit of the stage KILL, then dies by SIGKILL (a one-unit stage dies with its
    files staged but not committed)."""
    def run(self, task, units, state, progress=None):
        results = {}
        for i, unit in enumerate(units):
            if state.key.startswith(KILL + "_v"):
                if len(units) == 1:
                    task(unit, state.staging(unit).mkdir(parents=True, exist_ok=True) or state.staging(unit))
                    os.kill(os.getpid(), signal.SIGKILL)
                if i == 1:
                    os.kill(os.getpid(), signal.SIGKILL)
            results[unit.index] = commit_unit(task, unit, state)
        return results

texts, _ = planted_corpus(4, 30)
step = MinHashDedup(partition_edges=400)
run_workflow([source_stage(split_units(texts, 3)), *step.stages("source")], out=sys.argv[2],
             fingerprint="test", executor=KillingExecutor())
'''


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("clean")
    texts, _ = planted_corpus(4, 30)
    run_step(MinHashDedup(partition_edges=400), split_units(texts, 3), out)
    return tree(out)


@pytest.mark.parametrize("stage", ["signatures", "buckets", "verify", "components", "minhash_dedup"])
def test_killed_in_any_stage_resumes_to_the_same_bytes(tmp_path, stage, clean_run):
    texts, _ = planted_corpus(4, 30)
    step = MinHashDedup(partition_edges=400)
    name = stage if stage == "minhash_dedup" else f"minhash_dedup.{stage}"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", KILLER, str(HERE), str(tmp_path), name], env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    done = tmp_path / "_state" / f"{step.name}_v1" / "done"
    assert statekit.count(done) < 3  # the run did not finish
    run_step(step, split_units(texts, 3), tmp_path)
    assert tree(tmp_path) == clean_run


def test_step_is_registered_picklable_and_checks_options(tmp_path):
    assert step_class("minhash_dedup") is MinHashDedup
    step = MinHashDedup(shingle="char", ngram=9, normalize=["lower"])
    assert pickle.loads(pickle.dumps(step)) == step and step.normalize == ("lower",)
    assert [s.name for s in MinHashDedup().stages("up")] == [
        "minhash_dedup.signatures", "minhash_dedup.buckets", "minhash_dedup.verify", "minhash_dedup.components",
        "minhash_dedup"]
    assert MinHashDedup().candidate_probability(0.8) > 0.99
    for bad in ({"shingle": "token"}, {"bands": 0}, {"threshold": 2}, {"keep": "best"}, {"normalize": ("x",)}):
        with pytest.raises(ConfigError):
            MinHashDedup(**bad)


def test_character_shingles_find_a_near_copy(tmp_path):
    a = "The quick brown fox jumps over the lazy dog near the river bank every single morning."
    units = [[a * 3, "Something else entirely, with no overlap at all to speak of." * 3], [(a * 3).replace("fox", "cat")]]
    step = MinHashDedup(shingle="char", ngram=5)
    res = run_step(step, units, tmp_path)
    assert survivors(tmp_path, res, step) == ["unit-000000:0", "unit-000000:1"]
    # tasks pickle too (they cross to worker processes)
    for stage_results in res.values():
        assert stage_results
