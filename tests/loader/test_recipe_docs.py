"""docs/recipes.md: its recipe file parses, and its python blocks run as written (a tiny model, shards of the
real tracks with validation splits, the recipe of recipekit)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from recipekit import RECIPE, make_sources

from tokenmill.loader.recipe import parse_recipe

DOC = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"
TEXT = DOC.read_text(encoding="utf-8")


def test_the_documented_recipe_parses():
    block = re.findall(r"```yaml\n(.*?)```", TEXT, flags=re.S)[0]
    recipe = parse_recipe(yaml.safe_load(block))
    assert [p.name for p in recipe.phases] == ["stable", "decay", "long"] and recipe.global_batch == 32
    assert recipe.source("long").upsample_long.factor == 4 and recipe.phases[2].seq_len == 32768


def test_every_field_is_documented():
    from tokenmill.loader.recipe import PHASE_KEYS, SOURCE_KEYS, TOP_KEYS

    for key in TOP_KEYS | SOURCE_KEYS | PHASE_KEYS:
        assert f"`{key}" in TEXT, key


def test_the_python_blocks_run(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    make_sources(tmp_path)
    (tmp_path / "recipe.yaml").write_text(RECIPE)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=100_352, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, use_cache=False)
    model = transformers.LlamaForCausalLM(config)
    evaluated = []

    def evaluate(model, dataset):
        from tokenmill.loader import PackedCollator

        evaluated.append(len(dataset))
        with torch.no_grad():
            return model(**PackedCollator(pad_id=dataset.pad_id)([dataset[0]])).loss.item()

    namespace = {"model": model, "tokenizer": "default", "evaluate": evaluate}
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        for block in re.findall(r"```python\n(.*?)```", TEXT, flags=re.S):
            exec(compile(block, str(DOC), "exec"), namespace)
    finally:
        os.chdir(here)
    assert len(evaluated) == 2  # web and sft have a val/ split; the decay phase draws both
    log = (tmp_path / "run-log" / "consumed.rank0.jsonl").read_text().splitlines()
    assert sum('"kind": "val"' in line for line in log) == 2 and sum('"kind": "step"' in line for line in log) >= 3
