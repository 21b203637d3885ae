"""The tutorial's train.py runs unchanged whatever it is given: a blend, a schedule or a recipe (only the line
that builds ``blend`` is swapped; the model, collator, loader and loop are the tutorial's own)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from recipekit import make_sources

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
BUILD = re.compile(r"    blend = BlendedDataset\(.*?tokenizer=[^)]*\)[^\n]*\n", re.S)


def train_script() -> str:
    blocks = re.findall(r"```python\n(.*?)```", TUTORIAL.read_text(encoding="utf-8"), flags=re.S)
    script = next(b for b in blocks if b.startswith("# train.py"))
    assert len(BUILD.findall(script)) == 1
    return script


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("script")
    make_sources(root)
    (root / "recipe.yaml").write_text("""
seq_len: 256
batch: 2
sources: {web: {path: shards/web}, chat: {path: shards/sft}, long: {path: shards/long}}
phases:
  - {name: stable, steps: 4, weights: {web: 1}}
  - {name: decay, steps: 3, weights: {web: 0.7, chat: 0.3}}
  - {name: long, steps: 1, seq_len: 1024, weights: {long: 1}}
""")
    return root


VARIANTS = {
    "blend": 'BlendedDataset([("{root}/shards/web", 0.7), ("{root}/shards/sft", 0.3)], seq_len=256, seed=0, '
             'tokenizer="default")',
    "schedule": 'ScheduledBlend({{"web": "{root}/shards/web", "chat": "{root}/shards/sft"}}, [{{"until_step": 4, '
                '"weights": {{"web": 1}}}}, {{"weights": {{"web": 0.7, "chat": 0.3}}}}], num_samples=16, '
                'global_batch_size=2, seq_len=256, tokenizer="default")',
    "recipe": 'RecipeDataset("{root}/recipe.yaml", tokenizer="default")',
}


@pytest.mark.parametrize("kind", sorted(VARIANTS))
def test_the_tutorial_training_script_runs_on(kind, shards, capsys):
    code = BUILD.sub(f"    blend = {VARIANTS[kind].format(root=shards)}\n", train_script())
    code = code.replace("from tokenmill.loader import", "from tokenmill.loader import RecipeDataset, ScheduledBlend,")
    torch.set_num_threads(1)
    exec(compile(code, f"train.py ({kind})", "exec"), {"__name__": "__main__"})
    losses = [float(x) for x in re.findall(r"step \d+: loss ([\d.]+)", capsys.readouterr().out)]
    assert len(losses) == 8 and all(0 < x < 20 for x in losses)
