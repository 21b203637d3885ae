"""Wrong arguments and damaged logs around a recipe: each is a clear error, not a traceback or a silent
default (a log folder that is a file, a batch size of 0, a negative step, a log line missing a key)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from loaderkit import pretrain_docs

from tokenmill.cli import main
from tokenmill.errors import ConfigError, InputError
from tokenmill.loader import PackedLoader, RecipeDataset, check_run, load_recipe
from tokenmill.loader.plan import build_plan


@pytest.fixture
def recipe(write_shards, tmp_path):
    write_shards(pretrain_docs(np.random.default_rng(0), 200), name="web")
    path = tmp_path / "recipe.yaml"
    path.write_text("seq_len: 32\nbatch: 4\nsources: {web: {path: web}}\n"
                    "phases: [{name: a, steps: 5, weights: {web: 1}}, {name: b, steps: 5, weights: {web: 1}}]\n")
    return path


def identity(samples):
    return samples


def test_a_log_dir_that_is_a_file_is_refused(recipe, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    with pytest.raises(InputError, match=f"log_dir {taken}: cannot hold the run log"):
        PackedLoader.from_recipe(recipe, collate_fn=identity, log_dir=taken)
    assert taken.read_text() == "not a folder"


@pytest.mark.parametrize("value", [0, -4])
def test_a_batch_size_below_one_is_refused_not_replaced(recipe, value):
    with pytest.raises(ConfigError, match="batch_size >= 1"):
        PackedLoader.from_recipe(recipe, batch_size=value, collate_fn=identity)
    with pytest.raises(ConfigError, match="world_size"):
        PackedLoader.from_recipe(recipe, world_size=value, collate_fn=identity)


def test_a_negative_step_has_no_phase(recipe):
    data = RecipeDataset(recipe)
    assert data.phase_at_step(0).name == "a" and data.phase_at_step(5).name == "b"
    with pytest.raises(ConfigError, match="step -1: steps count from 0"):
        data.phase_at_step(-1)


def _logged(recipe, tmp_path):
    loader = PackedLoader.from_recipe(recipe, collate_fn=identity, log_dir=tmp_path / "log")
    list(loader)
    return tmp_path / "log" / "consumed.rank0.jsonl"


@pytest.mark.parametrize("damage, problem", [
    (lambda x: x.pop("count"), "a 'step' line without a valid count"),
    (lambda x: x.update(stride=0), "a 'step' line with stride 0"),
    (lambda x: x.update(tokens={"a": {"web": "many"}}), "a 'step' line without a valid tokens"),
    (lambda x: x.update(kind="stpe"), "unknown kind 'stpe'"),
    (lambda x: x.update(kind=["step"]), r"unknown kind \['step'\]"),  # unhashable: was a TypeError
])
def test_plan_check_names_a_damaged_log_line(recipe, tmp_path, capsys, damage, problem):
    log = _logged(recipe, tmp_path)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    damage(lines[2])
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(InputError, match=f"consumed.rank0.jsonl:3: {problem}"):
        check_run(build_plan(load_recipe(recipe)), tmp_path / "log")
    assert main(["plan", str(recipe), "--check", str(tmp_path / "log")]) == 1
    err = capsys.readouterr().err
    assert "consumed.rank0.jsonl:3" in err and "Traceback" not in err


def test_a_log_line_that_is_not_an_object_is_named(recipe, tmp_path):
    log = _logged(recipe, tmp_path)
    log.write_text("[1, 2]\n" + log.read_text())
    with pytest.raises(InputError, match="consumed.rank0.jsonl:1: not a run-log object"):
        check_run(build_plan(load_recipe(recipe)), tmp_path / "log")
