"""Tokenizer adapter: any tokenizer spec in, one :class:`Tokenizer` out (fast path checked against a reference)."""

from __future__ import annotations

from tokenmill.tokenize.tokenizer import Tokenizer, load_tokenizer

__all__ = ["Tokenizer", "load_tokenizer"]
