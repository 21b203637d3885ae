"""What the job tests write their small data from: two word lists (plain prose, shop spam) and a loader
recipe over a folder of shards named ``shards``."""

from __future__ import annotations

WORDS = "the river flows past old stone houses while children count boats and birds under a pale sky".split()
SHOP = "buy cheap shoes now best price click here free shipping order today sale discount cart".split()
RECIPE = """\
seq_len: 16
total_tokens: 2000
batch: 2
world_size: 1
sources:
  web: {path: shards}
phases:
  - {name: all, share: 1.0, weights: {web: 1.0}}
"""
