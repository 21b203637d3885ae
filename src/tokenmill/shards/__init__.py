"""Self-describing token shards: raw little-endian ids, optional loss mask, 64-bit offsets, JSON header.

The format is specified, with a worked example, in ``README.md`` beside this file.
"""

from __future__ import annotations

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


def __getattr__(name: str):
    if name == "export":  # exporters pull optional dependencies; import them on first use
        from tokenmill.shards.export import export

        return export
    raise AttributeError(f"module 'tokenmill.shards' has no attribute {name!r}")
