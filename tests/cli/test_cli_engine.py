"""``engine:`` in the pipeline file and ``--engine``/``--ray-address``: validated with the rest, the flags
override the file, and ``tokenmill curate`` runs on the Ray cluster the file names."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "curate"))
from curatekit import write_corpus  # noqa: E402

from tokenmill.cli import main  # noqa: E402


def _pipeline(tmp_path: Path, engine: dict, **extra) -> Path:
    src = write_corpus(tmp_path / "in" / "docs.jsonl", bad_rows=False)
    doc = {"track": "curate", "inputs": [str(src)], "out": str(tmp_path / "out"), "engine": engine,
           "steps": [{"name": "language", "languages": ["en"]}, {"name": "exact_dedup"}], **extra}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("engine", "extra", "problem"), [
    ({"name": "spark"}, {}, "engine.name: expected one of local, ray, got 'spark'"),
    ({"address": "auto"}, {}, "engine.address: a cluster address needs engine.name: ray"),
    ({"name": "ray", "workers": 2}, {"workers": 2}, "engine.workers: workers is also set at the top level"),
    ({"name": "ray", "workers": 0}, {}, "engine.workers: expected a positive number"),
    ({"name": "ray", "adress": "auto"}, {}, "engine.adress: unknown key; known keys: name, address, workers"),
])
def test_validate_reports_engine_problems(tmp_path, capsys, engine, extra, problem):
    path = _pipeline(tmp_path, engine, **extra)
    assert main(["validate", str(path)]) == 1
    assert problem in capsys.readouterr().out


def test_validate_accepts_an_engine_section_in_a_curate_pipeline(tmp_path, capsys):
    """(A curate pipeline's document inputs were refused as 'looks like pretrain data' before.)"""
    path = _pipeline(tmp_path, {"name": "ray", "address": "auto", "workers": 2})
    assert main(["validate", str(path)]) == 0, capsys.readouterr().out


def _run(path: Path, out: Path, *flags: str) -> dict:
    assert main(["curate", "--config", str(path), "--out", str(out), "--no-progress", *flags]) == 0
    return json.loads((out / "manifest.json").read_text())


def test_curate_runs_on_the_cluster_the_file_names_and_the_flag_overrides_it(ray_cluster, tmp_path, capsys):
    path = _pipeline(tmp_path, {"name": "ray", "address": ray_cluster, "workers": 2})
    on_ray = _run(path, tmp_path / "ray")
    local = _run(path, tmp_path / "local", "--engine", "local", "--workers", "1")
    assert (on_ray["run"]["engine"], local["run"]["engine"]) == ("ray", "local")
    assert on_ray["counts"] == local["counts"] and on_ray["counts"]["filtered"]
    assert on_ray["stage_packs"] == local["stage_packs"]
    for rel in [*local["documents"], *local["decision_ledger"]["files"], *local["stage_packs"]]:
        assert (tmp_path / "ray" / rel).read_bytes() == (tmp_path / "local" / rel).read_bytes(), rel


def test_ray_address_needs_a_ray_engine_from_the_flag_or_the_file(tmp_path, capsys):
    path = _pipeline(tmp_path, {"name": "local"})
    assert main(["curate", "--config", str(path), "--ray-address", "auto"]) == 1
    assert "--ray-address needs --engine ray" in capsys.readouterr().err
