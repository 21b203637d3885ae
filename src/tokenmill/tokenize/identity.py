"""The fingerprint of any tokenizer spec the CLI accepts, for checking shards against a model's tokenizer.

``fingerprint_of`` takes what ``--tokenizer`` takes (hub name, directory, ``tokenizer.json``, ``.tiktoken``
file or encoding name, SentencePiece ``.model``, ``"default"``), a tokenizer object (``tokenizers``,
a ``transformers`` fast tokenizer, a loaded :class:`~tokenmill.tokenize.Tokenizer`), or a fingerprint
string itself (64 hex digits as written in shard headers, or any string that names no tokenizer). A hub
name without an ``org/`` part is read as a fingerprint: give such tokenizers as a local directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, TypeGuard

from tokenmill.tokenize import sources
from tokenmill.tokenize.sources import TokenizerSpec
from tokenmill.tokenize.tokenizer import Tokenizer, load_tokenizer

_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")


def is_fingerprint(value: Any) -> TypeGuard[str]:
    """Whether ``value`` is a tokenizer fingerprint string (sha256 hex) rather than a tokenizer spec."""
    return isinstance(value, str) and _FINGERPRINT.match(value) is not None


def fingerprint_of(spec: str | TokenizerSpec | Tokenizer) -> str:
    """The fingerprint shards written with ``spec`` carry; loads the tokenizer when ``spec`` names one."""
    if is_fingerprint(spec):
        return spec
    if isinstance(spec, Tokenizer):
        return spec.fingerprint
    fingerprint = getattr(spec, "fingerprint", None)
    if isinstance(fingerprint, str):
        return fingerprint
    if isinstance(spec, str) and not names_tokenizer(spec):
        return spec  # neither a path, an encoding nor an org/name hub id: taken as a fingerprint as written
    return load_tokenizer(os.fspath(spec) if isinstance(spec, os.PathLike) else spec, fast=False).fingerprint


def names_tokenizer(text: str) -> bool:
    """Whether ``text`` is a tokenizer spec: ``default``, a path, a tiktoken encoding or an ``org/name`` hub id."""
    if text in ("default", sources.tk.DEFAULT_NAME) or sources.looks_local(text) or Path(text).expanduser().exists():
        return True
    return text in sources.tk.encoding_names() or text.count("/") == 1


def describe(spec: TokenizerSpec | Tokenizer) -> str:
    """A short name of ``spec`` for messages, with the path it was read from where one is known: two
    tokenizers of one name (``qwen2``) differ only there and by fingerprint."""
    if isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        path = Path(text).expanduser()
        return repr(text) + (f" at {path.resolve()}" if path.exists() and str(path.resolve()) != text else "")
    where = getattr(getattr(spec, "_source", None), "path", None) or getattr(spec, "name_or_path", None)
    return f"{type(spec).__name__} at {where}" if where else type(spec).__name__


def recorded(info: dict) -> str:
    """``'name' at PATH`` of a tokenizer as shards record it (their header's ``tokenizer_info``)."""
    where = info.get("path") or info.get("origin")
    return f"{info.get('name')!r}" + (f" at {where}" if where else "")
