"""Constants and small helpers of the shard format (the spec is in README.md beside this file)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from tokenmill.errors import ConfigError, ShardError

MAGIC = "tokenmill-shard"
FORMAT_VERSION = 1  # written for shards without a weights file: their bytes are those of version 1
WEIGHTS_VERSION = 2  # written for shards with a ``.weights`` file, which a version-1 reader would ignore
KNOWN_VERSIONS = (1, 2)
CHECKSUM = "sha256"
UINT16_LIMIT = 1 << 16
HASH_CHUNK = 16 << 20

# Header fields every shard of one set must agree on (``format_version`` and ``has_weights`` may differ:
# a run writes the weights file only for the shards whose examples carry weights).
COMMON_FIELDS = (
    "dtype",
    "vocab_size",
    "bos_id",
    "eos_id",
    "pad_id",
    "tokenizer",
    "tokenizer_fingerprint",
    "chat_template_hash",
    "has_mask",
)
REQUIRED_INFO = ("name", "fingerprint", "vocab_size")
OPTIONAL_INFO = {"bos_id": None, "eos_id": None, "pad_id": None, "chat_template_hash": ""}
DOC_SUFFIXES = ("ids", "mask", "weights", "idx", "docs")
WEIGHT_DTYPE = np.dtype("<f4")


def token_dtype(vocab_size: int) -> np.dtype:
    """Little-endian uint16 when every id fits (vocab_size <= 65,536), else uint32."""
    return np.dtype("<u2") if vocab_size <= UINT16_LIMIT else np.dtype("<u4")


def dtype_from_name(name: str) -> np.dtype:
    if name not in ("uint16", "uint32"):
        raise ShardError(f"unknown token dtype {name!r} in a shard header (expected 'uint16' or 'uint32')")
    return np.dtype("<u2") if name == "uint16" else np.dtype("<u4")


def normalize_tokenizer_info(info: dict) -> dict:
    """Check the required keys, fill the optional ones; raises ConfigError listing every problem."""
    problems = [f"tokenizer_info lacks {key!r}" for key in REQUIRED_INFO if key not in info]
    vocab = info.get("vocab_size")
    if "vocab_size" in info and (not isinstance(vocab, (int, np.integer)) or vocab <= 0):
        problems.append(f"tokenizer_info['vocab_size'] must be a positive int, got {vocab!r}")
    if problems:
        raise ConfigError(problems)
    full = {**OPTIONAL_INFO, **info}
    full["vocab_size"] = int(full["vocab_size"])
    full["chat_template_hash"] = full["chat_template_hash"] or ""
    return full


def file_names(stem: str, *, has_mask: bool, has_weights: bool = False) -> list[str]:
    present = {"mask": has_mask, "weights": has_weights}
    return [f"{stem}.{s}" for s in DOC_SUFFIXES if present.get(s, True)]


def build_header(
    *, info: dict, stem: str, n_docs: int, n_tokens: int, n_trained: int, has_mask: bool, checksums: dict,
    has_weights: bool = False,
) -> dict[str, Any]:
    """The JSON header of one shard; key order and content depend only on the inputs.

    A shard without weights gets exactly the version-1 header; ``has_weights`` is written only when true.
    """
    return {
        "magic": MAGIC,
        "format_version": WEIGHTS_VERSION if has_weights else FORMAT_VERSION,
        "dtype": token_dtype(info["vocab_size"]).name,
        "byte_order": "little",
        "vocab_size": info["vocab_size"],
        "bos_id": info["bos_id"],
        "eos_id": info["eos_id"],
        "pad_id": info["pad_id"],
        "tokenizer": info["name"],
        "tokenizer_fingerprint": info["fingerprint"],
        "chat_template_hash": info["chat_template_hash"],
        "n_docs": n_docs,
        "n_tokens": n_tokens,
        "n_trained_tokens": n_trained,
        "has_mask": has_mask,
        **({"has_weights": True} if has_weights else {}),
        "checksum_algorithm": CHECKSUM,
        "checksums": checksums,
        "files": file_names(stem, has_mask=has_mask, has_weights=has_weights),
        "tokenizer_info": info,
    }


def dump_json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n").encode("utf-8")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError(f"tokenizer_info value {value!r} is not JSON-serialisable")


def read_header(path: Path) -> dict | None:
    """The parsed header when ``path`` is a tokenmill shard header, else None (manifest, other JSON)."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("magic") != MAGIC:
        return None
    return doc


def file_digest(path: Path) -> str:
    """Hex sha256 of a file, read in 16 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()
