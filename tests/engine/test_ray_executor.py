"""The Ray executor on a local cluster (num_cpus=2): the same bytes as the local engine for both tracks
and for a three-stage workflow, setup once per actor, and a worker killed mid-unit retried by Ray."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'tokenmill[ray]')")

import killkit  # noqa: E402

from tokenmill.engine import LocalExecutor, run_workflow  # noqa: E402
from tokenmill.engine.ray import RayExecutor  # noqa: E402
from tokenmill.errors import ClusterError  # noqa: E402

HERE = Path(__file__).resolve().parent
TRACK = HERE.parent / "track"
sys.path.insert(0, str(TRACK))
import trackkit as tk  # noqa: E402

import statekit


@pytest.fixture
def cluster(ray_cluster):
    return ray_cluster


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_state" not in p.parts}


def test_three_stage_workflow_same_bytes_and_a_killed_worker_is_retried(cluster, tmp_path):
    run_workflow(killkit.stages(0.0), out=tmp_path / "local", fingerprint="f", executor=LocalExecutor(workers=1))
    flag = tmp_path / "died"
    res = run_workflow(killkit.stages(0.0, str(flag)), out=tmp_path / "ray", fingerprint="f",
                       executor=RayExecutor(workers=2))
    assert flag.exists(), "the worker never died: the retry was not exercised"
    assert tree(tmp_path / "ray") == tree(tmp_path / "local")
    assert [len(res[s]) for s in ("emit", "group", "apply")] == [killkit.PARTS, killkit.PARTITIONS, killkit.PARTS]
    assert not (tmp_path / "ray" / "_state" / "emit_v1" / "tmp").exists()  # staging gone once the stage ended


def test_a_unit_lost_more_than_retries_times_fails_clearly_and_the_same_run_resumes(cluster, tmp_path):
    """Unit 3's worker dies on every attempt: with retries=1 the run ends with ClusterError after 2 deaths,
    the other units' commits stay, and the same run once the cause is gone ends with the local bytes."""
    run_workflow(killkit.stages(0.0), out=tmp_path / "local", fingerprint="f", executor=LocalExecutor(workers=1))
    healed = tmp_path / "healed"
    with pytest.raises(ClusterError, match=r"died 2 times.*committed units stay: run the same command again"):
        run_workflow(killkit.stages(0.0, die_until=str(healed)), out=tmp_path / "ray", fingerprint="f",
                     executor=RayExecutor(workers=2, retries=1))
    done = set(statekit.committed(tmp_path / "ray", "emit_v1"))
    assert "part-0003" not in done and len(done) >= 1
    healed.touch()
    run_workflow(killkit.stages(0.0, die_until=str(healed)), out=tmp_path / "ray", fingerprint="f",
                 executor=RayExecutor(workers=2))
    assert tree(tmp_path / "ray") == tree(tmp_path / "local")


@pytest.mark.parametrize("track", ["pretrain", "sft"])
def test_tracks_write_the_same_bytes_on_ray_as_locally(cluster, tmp_path, track):
    from tokenmill.pretrain import run_pretrain
    from tokenmill.sft.run import run_sft

    src = tmp_path / "in.jsonl"
    if track == "pretrain":
        tk.write_docs(src, 200, seed=2, broken_every=31)
        run, extra = run_pretrain, {"shard_tokens": 600}
    else:
        tk.write_chats(src, 60, seed=2, broken_every=17)
        run, extra = run_sft, {"verify": 0}
    local = run([str(src)], out=tmp_path / "local", workers=1, unit_bytes=4000, progress=False, **extra)
    on_ray = run([str(src)], out=tmp_path / "ray", executor=RayExecutor(workers=2), unit_bytes=4000,
                 progress=False, **extra)
    assert on_ray["run"]["units"] == local["run"]["units"] > 3
    tk.assert_same_output(tmp_path / "local", tmp_path / "ray")


def test_cli_engine_ray_joins_the_running_cluster_and_matches_local(cluster, tmp_path):
    from tokenmill.cli import main

    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 80, seed=9)
    base = ["pretrain", str(src), "--unit-bytes", "4KB", "--no-progress"]
    assert main(base + ["--out", str(tmp_path / "local"), "--workers", "1"]) == 0
    assert main(base + ["--out", str(tmp_path / "ray"), "--engine", "ray", "--workers", "2"]) == 0
    tk.assert_same_output(tmp_path / "local", tmp_path / "ray")
    assert ray.is_initialized()  # the executor joined the cluster it found and left it running


def test_ray_address_without_engine_ray_is_refused(tmp_path, capsys):
    from tokenmill.cli import main

    assert main(["pretrain", "x.jsonl", "--out", str(tmp_path), "--ray-address", "auto"]) == 1
    assert "--engine ray" in capsys.readouterr().err


def test_setup_runs_once_per_actor_not_per_unit(cluster, tmp_path):
    from test_local import WriteSquares, _stage

    res = run_workflow([_stage(8, WriteSquares())], out=tmp_path, fingerprint="a", executor=RayExecutor(workers=2))
    results = res["squares"]
    assert [r.data["value"] for r in results] == [i * i for i in range(8)]
    assert {r.data["setups"] for r in results} == {1} and len({r.data["pid"] for r in results}) <= 2


def test_prepare_starts_the_actors_the_first_stage_uses_and_they_import_the_preload_modules(cluster, tmp_path):
    """``prepare`` (called by the tracks before they route and load the tokenizer) starts the actors then, with
    the track's modules imported as they start; the first stage runs on those actors, not new ones."""
    with RayExecutor(workers=2) as ex:
        ex.prepare(1, preload=("wave",))  # a module nothing else imports
        assert len(ex._actors) == 1  # one unit: one actor, not one per CPU
        started = list(ex._actors)
        assert ray.get(started[0].call.remote(eval, "'wave' in __import__('sys').modules"))
        run_workflow(killkit.stages(0.0), out=tmp_path / "ray", fingerprint="f", executor=ex)
        assert ex._actors[:1] == started
