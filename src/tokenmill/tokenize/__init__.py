"""Tokenizer adapter: any tokenizer spec in, one :class:`Tokenizer` out (fast path checked against a reference)."""

from __future__ import annotations

from tokenmill.base.lazy import lazy_exports

# imported on first use (base/lazy.py): the fork server imports `tokenmill.tokenize.backends` alone (engine/warm.py)
_EXPORTS = {"Tokenizer": "tokenmill.tokenize.tokenizer", "load_tokenizer": "tokenmill.tokenize.tokenizer"}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
