"""tokenmill: raw text in, training-ready token shards out.

Two tracks that never mix by accident: ``pretrain`` (documents, every token trained) and ``sft``
(conversations rendered with the model's chat template, loss on the assistant's tokens). Both write the
same self-describing shard format, read back with :func:`open_shards`.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "open_shards", "inspect", "load_tokenizer"]


def __getattr__(name: str):
    # Lazy: `import tokenmill` stays cheap and never pulls optional dependencies.
    if name == "open_shards":
        from tokenmill.shards import open_shards

        return open_shards
    if name == "inspect":
        from tokenmill.route import inspect

        return inspect
    if name == "load_tokenizer":
        from tokenmill.tokenize import load_tokenizer

        return load_tokenizer
    raise AttributeError(f"module 'tokenmill' has no attribute {name!r}")
