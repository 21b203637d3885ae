"""`plan` counts repetition on the tokens the loader reads: a source served at two windows is read pass by pass
(the second window reads what the first left), and one folder under two source names is one folder read by
both. The oracle walks every sample the RecipeDataset serves."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tokenmill.errors import ConfigError
from tokenmill.loader.plan import build_plan
from tokenmill.loader.recipe import parse_recipe
from tokenmill.loader.recipe_data import RecipeDataset


@pytest.fixture
def web(write_shards, loader_rng):
    return write_shards(_docs(loader_rng, 400), name="web", max_tokens=4000)


@pytest.fixture
def loader_rng():
    return np.random.default_rng(7)


def _docs(rng, n):
    from loaderkit import pretrain_docs

    return pretrain_docs(rng, n, min_len=5, max_len=60)


def _recipe(tmp_path, sources: dict, phases: list, *, seq_len=32, total=None):
    doc = {"seq_len": seq_len, "batch": 4, "world_size": 1, "sources": sources, "phases": phases}
    if total:
        doc["total_tokens"] = total
    return parse_recipe(doc, base=tmp_path)


def _reads(recipe) -> dict[str, np.ndarray]:
    """Oracle: times each token of each folder (real path) is read, walking every served sample's pieces."""
    data = RecipeDataset(recipe)
    counts: dict[str, np.ndarray] = {}
    for k in range(len(data)):
        c, docs, starts, lens = data.pieces(k)
        corpus = data.datasets[c].corpus
        base = getattr(corpus, "base", corpus)
        docs = corpus.doc_map[docs] if hasattr(corpus, "doc_map") else docs
        offsets = np.r_[0, np.cumsum(base.lengths.astype(np.int64))]
        name = data.source_of_component[data.names[c]]
        folder = os.path.realpath(recipe.source(name).path)
        tokens = counts.setdefault(folder, np.zeros(int(offsets[-1]), np.int64))
        for doc, start, n in zip(docs, starts, lens):
            tokens[offsets[doc] + start: offsets[doc] + start + n] += 1
    return counts


def test_one_source_at_two_windows_is_read_once_below_one_epoch(tmp_path, web):
    """The second window reads what the first left: under one epoch no token is read twice (two packings,
    before, read 14% of it twice at 0.76 epochs)."""
    recipe = _recipe(tmp_path, {"web": {"path": "web"}},
                     [{"name": "short", "tokens": 5_000, "weights": {"web": 1.0}},
                      {"name": "long", "tokens": 5_000, "seq_len": 128, "weights": {"web": 1.0}}])
    plan = build_plan(recipe)
    (reads,) = _reads(recipe).values()
    s = plan["sources"]["web"]
    assert s["epochs"] == pytest.approx(reads.sum() / reads.size) and 0.5 < s["epochs"] < 1
    assert s["repeated_share"] == np.mean(reads >= 2) == 0
    assert s["unread_share"] == pytest.approx(np.mean(reads == 0)) == pytest.approx(1 - s["epochs"])


def test_one_folder_under_two_names_is_counted_once_with_both_draws(tmp_path, web):
    (tmp_path / "alias").symlink_to(web)
    recipe = _recipe(tmp_path, {"a": {"path": "web"}, "b": {"path": "alias"}},
                     [{"name": "p", "tokens": 40_000, "weights": {"a": 0.75, "b": 0.25}}])
    plan = build_plan(recipe)
    (reads,) = _reads(recipe).values()
    a, b = plan["sources"]["a"], plan["sources"]["b"]
    assert a["tokens_drawn"] + b["tokens_drawn"] == reads.sum()
    assert a["epochs"] == b["epochs"] == pytest.approx(reads.sum() / reads.size) and a["epochs"] > 1.5
    assert a["same_folder_as"] == ["b"] and b["same_folder_as"] == ["a"]
    assert a["repeated_share"] == pytest.approx(np.mean(reads >= 2))
    assert not [w for w in plan["warnings"] if "same folder" in w]  # under the repeat limit: two views are allowed


def test_the_repeat_warning_counts_every_name_of_the_folder(tmp_path, web):
    (tmp_path / "alias").symlink_to(web)
    recipe = _recipe(tmp_path, {"a": {"path": "web"}, "b": {"path": "alias"}},
                     [{"name": "p", "tokens": 80_000, "weights": {"a": 0.75, "b": 0.25}}])  # 1.5 epochs by b alone
    said = [w for w in build_plan(recipe)["warnings"] if "is repeated" in w]
    assert len(said) == 2 and all("6.0 epochs" in w and "which names the same folder" in w for w in said), said


def test_max_epochs_is_held_against_the_folder_both_names_read(tmp_path, web):
    (tmp_path / "alias").symlink_to(web)
    recipe = _recipe(tmp_path, {"a": {"path": "web", "max_epochs": 2.0}, "b": {"path": "alias"}},
                     [{"name": "p", "tokens": 40_000, "weights": {"a": 0.25, "b": 0.75}}])  # a alone: 0.75 epochs
    with pytest.raises(ConfigError, match=r"sources\.a\.max_epochs: the phases draw 2\.9"):
        build_plan(recipe)


def test_capped_and_upsampled_sources_match_the_oracle(tmp_path, web):
    recipe = _recipe(tmp_path, {"web": {"path": "web", "cap_tokens": 6_000,
                                        "upsample_long": {"min_tokens": 40, "factor": 3}}},
                     [{"name": "a", "tokens": 4_000, "weights": {"web": 1.0}},
                      {"name": "b", "tokens": 4_000, "seq_len": 64, "weights": {"web": 1.0}}])
    plan = build_plan(recipe)
    (reads,) = _reads(recipe).values()
    s = plan["sources"]["web"]
    used = reads[:s["tokens_available"]]  # the cap keeps a prefix of the documents
    assert reads[s["tokens_available"]:].sum() == 0
    assert s["epochs"] == pytest.approx(used.sum() / used.size)
    assert s["repeated_share"] == pytest.approx(np.mean(used >= 2))
    assert s["unread_share"] == pytest.approx(np.mean(used == 0))


def test_sft_examples_packed_at_two_windows_match_the_oracle(tmp_path, write_shards, loader_rng):
    """Best-fit-decreasing packs (whole examples; one longer than the short window is left to the long one)."""
    from loaderkit import sft_docs

    write_shards(sft_docs(loader_rng, 300, max_len=50), name="chat", max_tokens=3000)
    recipe = _recipe(tmp_path, {"chat": {"path": "chat"}},
                     [{"name": "a", "tokens": 3_000, "seq_len": 48, "weights": {"chat": 1.0}},
                      {"name": "b", "tokens": 3_000, "seq_len": 96, "weights": {"chat": 1.0}}])
    plan = build_plan(recipe)
    (reads,) = _reads(recipe).values()
    s = plan["sources"]["chat"]
    assert s["mode"] == "bfd" and s["tokens_drawn"] == reads.sum()
    assert s["epochs"] == pytest.approx(reads.sum() / reads.size)
    assert s["repeated_share"] == np.mean(reads >= 2) == 0  # the second window packs the examples left
    assert s["unread_share"] == pytest.approx(np.mean(reads == 0)) and s["unread_share"] > 0
