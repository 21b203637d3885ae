"""Self-describing token shards: raw little-endian ids, optional loss mask, 64-bit offsets, JSON header.

The format is specified, with a worked example, in ``README.md`` beside this file.
"""

from __future__ import annotations

from tokenmill.base.lazy import lazy_exports
from tokenmill.shards.format import FORMAT_VERSION, MAGIC, token_dtype
from tokenmill.shards.reader import Shard, ShardSet, open_shards
from tokenmill.shards.verify import verify_shards
from tokenmill.shards.writer import ShardWriter

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "Shard",
    "ShardSet",
    "ShardWriter",
    "export",
    "open_shards",
    "token_dtype",
    "verify_shards",
]

# exporters pull optional dependencies: imported on first use (base/lazy.py)
__getattr__ = lazy_exports(__name__, {"export": "tokenmill.shards.export"})
