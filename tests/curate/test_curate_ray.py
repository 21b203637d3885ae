"""``tokenmill curate`` with exact and MinHash dedup on a local Ray cluster (num_cpus=2): the same documents,
ledger and counts as the local engine with 1 or 2 Ray workers, a worker killed mid-unit retried by Ray,
and the connected-components rounds run as Ray tasks in bounded memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")

from raykit import STEPS, DieOnce, write_web_corpus  # noqa: E402

from tokenmill.curate.workflows.curate import run_curate  # noqa: E402
from tokenmill.engine.ray import RayExecutor  # noqa: E402

COMPARED = ("counts", "identity", "funnel", "documents", "stage_ledgers", "stage_packs", "decision_ledger",
            "stages")


def _outputs(root: Path) -> dict[str, bytes]:
    """Every file a run wrote (documents, ledger, the intermediate stages) but its state, manifest and data card
    (the card records the pipeline, whose DieOnce step names another flag file in each run)."""
    skip = ("manifest.json", ".tokenmill.lock", "datacard.md", "datacard.json")
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_state" not in p.parts and p.name not in skip}


def _curate(src: Path, out: Path, flag: Path, **engine):
    steps = [STEPS[0], {"name": "language", "languages": ["en"]}, DieOnce(str(flag)), *STEPS[2:]]
    return run_curate([str(src)], out=out, steps=steps, unit_bytes=50_000, progress=False, report=False, **engine)


def test_curate_with_dedup_same_bytes_on_ray_with_1_and_2_workers_and_a_killed_worker(ray_cluster, tmp_path):
    src = write_web_corpus(tmp_path / "in" / "web.jsonl", 60)
    spent = tmp_path / "spent"
    spent.touch()  # the step never kills in these runs
    local = _curate(src, tmp_path / "local", spent, workers=1)
    one = _curate(src, tmp_path / "ray1", spent, executor=RayExecutor(workers=1))
    flag = tmp_path / "died"
    two = _curate(src, tmp_path / "ray2", flag, executor=RayExecutor(workers=2))
    assert flag.exists(), "no worker died: the retry was not exercised"

    c = local["counts"]
    assert c["balanced"] and local["run"]["units"] >= 3
    assert c["filtered"]["exact_dedup_v1:duplicate"] > 0 and c["filtered"]["minhash_dedup_v1:duplicate"] > 0
    assert any(k.startswith("url_v1:") for k in c["filtered"]) and any(k.startswith("language_v1:") for k in c["filtered"])
    for run in (one, two):
        assert {k: run[k] for k in COMPARED} == {k: local[k] for k in COMPARED}
    want = _outputs(tmp_path / "local")
    assert any(k.startswith("documents/") for k in want) and any(k.startswith("ledger/") for k in want)
    assert _outputs(tmp_path / "ray1") == want
    assert _outputs(tmp_path / "ray2") == want


def test_minhash_grouping_and_components_run_as_ray_tasks_in_bounded_memory(ray_cluster, tmp_path):
    """Band buckets: one unit per hash range, on the actors; components: every per-partition call of
    every round a Ray task in another process, holding no more rows than ``partition_edges``."""
    from dedupkit import planted_corpus, run_step, source_stage, split_units, tree

    from tokenmill.curate.dedup.minhash import MinHashDedup
    from tokenmill.engine import run_workflow

    texts, _ = planted_corpus(2, 40)
    texts += [texts[0] + f" extra{i}" for i in range(8)]  # one big cluster
    units, bound = split_units(texts, 3), 25
    step = MinHashDedup(partition_edges=bound)
    local = run_step(step, units, tmp_path / "local")
    with RayExecutor(workers=2) as ex:  # one set of actors for every stage
        on_ray = run_workflow([source_stage(units), *step.stages("source")], out=tmp_path / "ray", fingerprint="test",
                              executor=ex)
    assert tree(tmp_path / "ray") == tree(tmp_path / "local")
    buckets = on_ray["minhash_dedup.buckets"]
    assert len(buckets) > 3 and max(r.data["entries_held"] for r in buckets) <= 2 * bound
    (comp,) = on_ray["minhash_dedup.components"]
    (here,) = local["minhash_dedup.components"]
    assert comp.data["partitions"] == here.data["partitions"] >= 3 and comp.data["rounds"] == here.data["rounds"] >= 1
    assert comp.data["calls"] == here.data["calls"] > 4 * comp.data["partitions"]
    assert here.data["processes"] == [os.getpid()]  # locally: one after the other, in the unit's process
    assert os.getpid() not in comp.data["processes"] and len(comp.data["processes"]) == 2  # the two actors
    held = comp.data["held"]
    assert held["edges"] <= bound and held["messages"] <= bound and held["nodes"] <= 2 * bound


def test_the_dclm_preset_on_ray_gives_the_local_bytes(ray_cluster, tmp_path):
    """The whole ``dclm`` preset (URL, language, RefinedWeb heuristics, exact and MinHash dedup, the
    corpus-wide top 10% by a quality model) on 2 Ray workers writes what the local engine writes."""
    pytest.importorskip("fasttext", reason="fasttext is not installed (pip install 'tokenmill[quality]')")
    import random

    from raykit import STOP, WORDS

    from tokenmill.curate.quality.classifier import train_quality

    rng = random.Random(0)
    good = [" ".join(rng.choice(STOP + list(WORDS)) for _ in range(60)) + "." for _ in range(200)]
    spam = [" ".join(rng.choice("click here buy now cheap deal free win prize".split()) for _ in range(60))
            for _ in range(200)]
    model = tmp_path / "quality.bin"
    train_quality(good, spam, out=model)
    src = write_web_corpus(tmp_path / "in" / "web.jsonl", 60)
    runs = {}
    for name, engine in (("local", {"workers": 1}), ("ray", {"executor": RayExecutor(workers=2)})):
        runs[name] = run_curate([str(src)], out=tmp_path / name, preset="dclm", quality_model=str(model),
                                unit_bytes=50_000, progress=False, report=False, **engine)
    c = runs["local"]["counts"]
    assert c["balanced"] and c["kept"] > 0 and c["filtered"]["quality_v1:low_quality"] > 0
    assert c["filtered"]["exact_dedup_v1:duplicate"] > 0 and c["filtered"]["minhash_dedup_v1:duplicate"] > 0
    assert {k: runs["ray"][k] for k in COMPARED} == {k: runs["local"][k] for k in COMPARED}
    assert runs["ray"]["run"]["engine"] == "ray"
    assert _outputs(tmp_path / "ray") == _outputs(tmp_path / "local")
    from tokenmill.report.ledger import ledger_problems

    assert ledger_problems(tmp_path / "ray", runs["ray"]) == []  # one row per input record, on Ray too
