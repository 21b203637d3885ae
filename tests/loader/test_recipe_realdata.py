"""Real-data tier: a long-context recipe over web pages and whole books of ../shared/data (Qwen2 tokenizer),
planned at 32k-128k windows; the plan's long-document shares and tokens match the shards, and the loader
serves the plan's first long windows with positions restarting at every document."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tokenmill.cli import main
from tokenmill.shards import open_shards


@pytest.fixture(scope="module")
def shards(shared_data, tmp_path_factory):
    from tokenmill.pretrain import run_pretrain

    root = tmp_path_factory.mktemp("realrecipe")
    tok = root / "qwen2"
    tok.mkdir()
    shutil.copy(shared_data / "tokenizers/qwen2_vocab.json", tok / "vocab.json")
    shutil.copy(shared_data / "tokenizers/qwen2_merges.txt", tok / "merges.txt")
    shutil.copy(shared_data / "chat_templates/qwen2-1.5b-instruct-finetune_tokenizer_config.json",
                tok / "tokenizer_config.json")
    run_pretrain([str(shared_data / "pretrain/llamafactory_c4_demo.jsonl")], out=root / "web", tokenizer=str(tok),
                 workers=1, progress=False)
    run_pretrain([str(shared_data / "pretrain/tinyshakespeare.txt"),
                  str(shared_data / "pretrain/gutenberg_1342_pride_and_prejudice.txt")], out=root / "books",
                 tokenizer=str(tok), workers=1, progress=False)
    return root


@pytest.mark.parametrize("window", [32_768, 65_536, 131_072])
def test_a_long_context_recipe_on_real_documents(shards, window, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"""
seq_len: 2048
batch: 1
sources:
  web: {{path: {shards / 'web'}}}
  books: {{path: {shards / 'books'}, upsample_long: {{min_tokens: {window}, factor: 2}}}}
phases:
  - {{name: stable, steps: 20, weights: {{web: 1}}}}
  - {{name: long, steps: 2, seq_len: {window}, weights: {{books: 1}}}}
""")
    assert main(["plan", str(recipe), "--out", str(tmp_path / "plan")]) == 0
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    books = open_shards(shards / "books").lengths.astype(np.int64)
    served = np.concatenate([books, books[books >= window]])
    assert plan["phases"][1]["long_doc_share"]["books"] == pytest.approx(served[served > window].sum() / served.sum())
    assert plan["phases"][1]["tokens"] == {"books": 2 * window} and plan["phases"][0]["tokens"] == {"web": 20 * 2048}
    torch = pytest.importorskip("torch")  # noqa: F841
    from tokenmill.loader import PackedLoader

    loader = PackedLoader.from_recipe(recipe, tokenizer=str(shards / "qwen2"))
    pieces = loader.dataset[len(loader.dataset) - 1]["seq_lens"]  # the documents of the last window (epoch 0)
    batches = list(loader)  # the whole run; the loader then moves to epoch 1
    last = batches[-1]
    assert last["input_ids"].shape == (1, window)
    expected = np.concatenate([np.arange(n) for n in pieces])
    np.testing.assert_array_equal(last["position_ids"][0].numpy(), expected)  # restarts at every document
    assert loader.vocab_size == 151_646
