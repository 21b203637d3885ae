"""tokenmill: raw text in, training-ready token shards out.

Two tracks that never mix by accident: ``pretrain`` (documents, every token trained) and ``sft``
(conversations rendered with the model's chat template, loss on the assistant's tokens). Both write the
same self-describing shard format, read back with :func:`open_shards`.
"""

from __future__ import annotations

from tokenmill.base.lazy import lazy_exports

__version__ = "0.1.0"

# imported on first use (base/lazy.py): `import tokenmill` stays cheap and never pulls optional dependencies
_EXPORTS = {"open_shards": "tokenmill.shards", "inspect": "tokenmill.route", "load_tokenizer": "tokenmill.tokenize"}
__all__ = ["__version__", "open_shards", "inspect", "load_tokenizer"]
__getattr__ = lazy_exports(__name__, _EXPORTS)
