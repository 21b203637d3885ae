"""verify_shards: read every byte of a shard directory and list what is wrong with it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from tokenmill.errors import ShardError
from tokenmill.shards.format import COMMON_FIELDS, WEIGHT_DTYPE, dtype_from_name, file_digest
from tokenmill.shards.inventory import inventory_problems, no_shards, shard_headers

_CHUNK = 1 << 24  # tokens scanned at a time


def verify_shards(directory: str | os.PathLike) -> list[str]:
    """Problems found in the shards of ``directory`` (checksums, ranges, lengths, offsets); [] when sound."""
    directory = Path(directory)
    headers = shard_headers(directory)
    problems = inventory_problems(directory, headers)
    if not headers:
        return problems or [no_shards(directory)]
    for path, header in headers:
        stem = path.name[: -len(".json")]
        problems += [f"{stem}: {p}" for p in _verify_one(directory, stem, header)]
    problems += _cross_shard(headers)
    return problems


def _verify_one(directory: Path, stem: str, header: dict) -> list[str]:
    try:
        dtype = dtype_from_name(header.get("dtype", ""))
        n_tokens, n_docs = int(header["n_tokens"]), int(header["n_docs"])
        vocab = int(header["vocab_size"])
    except (ShardError, KeyError, TypeError, ValueError) as exc:
        return [f"unreadable header fields ({exc})"]
    problems = _checksums(directory, header)
    ids = _load(directory / f"{stem}.ids", dtype)
    problems += _ids(ids, n_tokens, vocab)
    if header.get("has_mask"):
        mask = _load(directory / f"{stem}.mask", np.dtype(np.uint8))
        problems += _mask(mask, len(ids), header)
        if header.get("has_weights"):
            problems += _weights(_load(directory / f"{stem}.weights", WEIGHT_DTYPE), mask)
    problems += _offsets(_load(directory / f"{stem}.idx", np.dtype("<i8")), n_docs, n_tokens)
    problems += _docs(directory / f"{stem}.docs", n_docs)
    return problems


def _load(path: Path, dtype: np.dtype) -> np.ndarray:
    size = path.stat().st_size if path.is_file() else 0
    count = size // dtype.itemsize
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


def _checksums(directory: Path, header: dict) -> list[str]:
    problems = []
    for name in header.get("files", []):
        if not (directory / name).is_file():
            problems.append(f"file {name} is missing")
    for name, expected in sorted(header.get("checksums", {}).items()):
        path = directory / name
        if path.is_file() and file_digest(path) != expected:
            problems.append(f"checksum mismatch in {name}: the file changed after it was written")
    return problems


def _ids(ids: np.ndarray, n_tokens: int, vocab: int) -> list[str]:
    problems = []
    if len(ids) != n_tokens:
        problems.append(f"ids length {len(ids)} != n_tokens {n_tokens} in the header")
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        top = int(chunk.max())
        if top >= vocab:
            where = start + int(np.argmax(chunk >= vocab))
            problems.append(f"token id {top} >= vocab_size {vocab} (first at token {where})")
            break
    return problems


def _mask(mask: np.ndarray, n_ids: int, header: dict) -> list[str]:
    problems = []
    if len(mask) != n_ids:
        problems.append(f"mask length {len(mask)} != ids length {n_ids}")
    trained = 0
    for start in range(0, len(mask), _CHUNK):
        chunk = mask[start : start + _CHUNK]
        if int(chunk.max()) > 1:
            problems.append("mask holds values other than 0 and 1")
            return problems
        trained += int(np.count_nonzero(chunk))
    if trained != header.get("n_trained_tokens"):
        claimed = header.get("n_trained_tokens")
        problems.append(f"mask trains {trained} tokens but the header says n_trained_tokens={claimed}")
    return problems


def _weights(weights: np.ndarray, mask: np.ndarray) -> list[str]:
    if len(weights) != len(mask):
        return [f"weights length {len(weights)} != mask length {len(mask)}"]
    for start in range(0, len(weights), _CHUNK):
        w, m = weights[start : start + _CHUNK], mask[start : start + _CHUNK]
        if not np.isfinite(w).all() or (w < 0).any():
            return ["weights hold negative or non-finite values"]
        if ((w > 0) != (m != 0)).any():
            return ["weights are > 0 where the mask is 0, or 0 where it is 1"]
    return []


def _offsets(offsets: np.ndarray, n_docs: int, n_tokens: int) -> list[str]:
    if len(offsets) != n_docs + 1:
        return [f"idx holds {len(offsets)} offsets, expected n_docs + 1 = {n_docs + 1}"]
    problems = []
    if offsets[0] != 0:
        problems.append(f"offsets start at {int(offsets[0])}, expected 0")
    if (np.diff(offsets) < 0).any():
        problems.append("offsets are not monotonic (a document has a negative length)")
    if offsets[-1] != n_tokens:
        problems.append(f"offsets end at {int(offsets[-1])}, expected n_tokens {n_tokens}")
    return problems


def _docs(path: Path, n_docs: int) -> list[str]:
    if not path.is_file():
        return []  # reported as a missing file
    try:
        rows = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all().num_rows
    except (pa.ArrowInvalid, OSError) as exc:
        return [f"{path.name} is not a readable Arrow IPC file ({exc})"]
    return [] if rows == n_docs else [f"{path.name} holds {rows} records, expected n_docs {n_docs}"]


def _cross_shard(headers: list[tuple[Path, dict]]) -> list[str]:
    (first_path, first), problems = headers[0], []
    for path, header in headers[1:]:
        for key in COMMON_FIELDS:
            if header.get(key) != first.get(key):
                mine, theirs = header.get(key), first.get(key)
                problems.append(f"{path.name} and {first_path.name} disagree on {key}: {mine!r} vs {theirs!r}")
    return problems
