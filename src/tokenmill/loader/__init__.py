"""Serve token shards to a training loop: packed datasets, blending, recipes, collation, resumable order.

``PackedDataset`` and ``BlendedDataset`` are plain map-style datasets (numpy samples); ``PackedCollator``,
the preference pair collators (``PaddedPairCollator``, ``PackedPairCollator``) and ``PackedLoader`` need the
``torch`` extra, imported when they are first used.
"""

from __future__ import annotations

from tokenmill.loader.blend import BlendedDataset
from tokenmill.loader.collate import PackedCollator
from tokenmill.loader.dataset import PackedDataset
from tokenmill.loader.loader import PackedLoader
from tokenmill.loader.order import epoch_seed, partition, permute
from tokenmill.loader.pairs import PackedPairCollator, PaddedPairCollator
from tokenmill.loader.recipe import Recipe, load_recipe
from tokenmill.loader.recipe_data import RecipeDataset
from tokenmill.loader.runlog import RunLog, check_run
from tokenmill.loader.schedule import ScheduledBlend, mixture
from tokenmill.loader.stats import render_stats, shard_stats
from tokenmill.shards.pairs import PreferenceDataset

__all__ = [
    "BlendedDataset",
    "PackedCollator",
    "PackedDataset",
    "PackedLoader",
    "PackedPairCollator",
    "PaddedPairCollator",
    "PreferenceDataset",
    "Recipe",
    "RecipeDataset",
    "RunLog",
    "ScheduledBlend",
    "epoch_seed",
    "partition",
    "permute",
    "check_run",
    "load_recipe",
    "mixture",
    "render_stats",
    "shard_stats",
]
