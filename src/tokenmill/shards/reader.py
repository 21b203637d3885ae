"""Zero-copy reads of a shard directory: ``open_shards`` -> ``ShardSet`` of documents."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokenmill.engine.store import readable
from tokenmill.errors import ShardError
from tokenmill.shards.format import COMMON_FIELDS, KNOWN_VERSIONS, WEIGHT_DTYPE, dtype_from_name
from tokenmill.shards.inventory import inventory_problems, no_shards, shard_headers
from tokenmill.shards.verify import verify_shards
from tokenmill.tokenize.identity import describe, fingerprint_of, recorded


class Shard:
    """One shard: header plus lazily opened memmaps of its ids, mask, weights, offsets and doc records."""

    def __init__(self, directory: Path, stem: str, header: dict):
        self.directory, self.stem, self.header = directory, stem, header
        self.dtype = dtype_from_name(header["dtype"])
        self.n_docs, self.n_tokens = int(header["n_docs"]), int(header["n_tokens"])
        self.has_mask = bool(header["has_mask"])
        self.has_weights = bool(header.get("has_weights", False))
        self._maps: dict[str, Any] = {}  # memory maps by suffix, and "docs": the record batch

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_maps": {}}  # memmaps are reopened, never pickled

    def path(self, suffix: str) -> Path:
        return self.directory / f"{self.stem}.{suffix}"

    @property
    def ids(self) -> np.ndarray:
        return self._memmap("ids", self.dtype, self.n_tokens)

    @property
    def mask(self) -> np.ndarray | None:
        return self._memmap("mask", np.dtype(np.uint8), self.n_tokens) if self.has_mask else None

    def mask_slice(self, lo: int, hi: int) -> np.ndarray:
        """The loss mask of tokens ``[lo, hi)`` as bool (a shard of a set that has a loss mask)."""
        mask = self.mask
        if mask is None:
            raise ShardError(f"{self.path('mask')}: this shard has no loss mask, the others of its set do")
        return np.asarray(mask[lo:hi]).view(np.bool_)

    @property
    def weights(self) -> np.ndarray | None:
        return self._memmap("weights", WEIGHT_DTYPE, self.n_tokens) if self.has_weights else None

    @property
    def offsets(self) -> np.ndarray:
        return self._memmap("idx", np.dtype("<i8"), self.n_docs + 1)

    @property
    def docs(self) -> pa.RecordBatch:
        if "docs" not in self._maps:
            try:
                reader = pa.ipc.open_file(pa.memory_map(str(self.path("docs")), "r"))
                self._maps["docs"] = reader.get_batch(0) if reader.num_record_batches else None
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise ShardError(f"{self.path('docs')} is not a readable Arrow IPC file ({exc}); the shard is "
                                 "corrupt: run `tokenmill audit` on the directory and rewrite the shard") from exc
        return self._maps["docs"]

    def expected_sizes(self) -> dict[str, int]:
        sizes = {"ids": self.n_tokens * self.dtype.itemsize, "idx": (self.n_docs + 1) * 8}
        if self.has_mask:
            sizes["mask"] = self.n_tokens
        if self.has_weights:
            sizes["weights"] = self.n_tokens * WEIGHT_DTYPE.itemsize
        return sizes

    def _memmap(self, suffix: str, dtype: np.dtype, count: int) -> np.ndarray:
        if suffix not in self._maps:
            if count == 0:  # an empty file cannot be memory-mapped
                self._maps[suffix] = np.zeros(0, dtype=dtype)
            else:
                self._maps[suffix] = np.memmap(self.path(suffix), dtype=dtype, mode="r", shape=(count,))
        return self._maps[suffix]


class ShardSet(Sequence):
    """Every shard of one directory as one sequence of documents; pickles by directory."""

    def __init__(self, directory: Path, shards: list[Shard], manifest: dict):
        self.directory, self.shards, self.manifest = directory, shards, manifest
        first = shards[0].header
        self.header = {key: first[key] for key in COMMON_FIELDS}
        self.header["format_version"] = max(int(s.header["format_version"]) for s in shards)
        self.header["has_weights"] = any(s.has_weights for s in shards)
        self.header["tokenizer_info"] = first.get("tokenizer_info", {})
        self._doc_ends = np.cumsum([s.n_docs for s in shards], dtype=np.int64)
        self._tok_ends = np.cumsum([s.n_tokens for s in shards], dtype=np.int64)
        self._lengths: np.ndarray | None = None

    def __reduce__(self):
        return (_reopen, (str(self.directory), self.fingerprint, self.allow_partial))

    allow_partial = False  # opened with allow_partial=True (an unfinished run): reopened the same way

    fingerprint = property(lambda self: self.header["tokenizer_fingerprint"])
    tokenizer_name = property(lambda self: self.header["tokenizer"])
    chat_template_hash = property(lambda self: self.header["chat_template_hash"])
    has_mask = property(lambda self: self.header["has_mask"])
    has_weights = property(lambda self: self.header["has_weights"])
    vocab_size = property(lambda self: self.header["vocab_size"])
    bos_id = property(lambda self: self.header["bos_id"])
    eos_id = property(lambda self: self.header["eos_id"])
    pad_id = property(lambda self: self.header["pad_id"])
    dtype = property(lambda self: dtype_from_name(self.header["dtype"]))
    n_docs = property(lambda self: int(self._doc_ends[-1]))
    n_tokens = property(lambda self: int(self._tok_ends[-1]))
    n_trained_tokens = property(lambda self: sum(int(s.header["n_trained_tokens"]) for s in self.shards))

    @property
    def lengths(self) -> np.ndarray:
        """Token count of every document, in order (read from the ``.idx`` files once, then kept).

        int32 when every shard holds fewer than 2**31 tokens (no document can be longer), else int64.
        """
        if self._lengths is None:
            self._lengths = self.read_lengths()
        return self._lengths

    @property
    def lengths_dtype(self) -> np.dtype:
        """The dtype of :attr:`lengths`: int32 when every shard has fewer than 2**31 tokens, else int64."""
        return np.dtype(np.int32 if max(s.n_tokens for s in self.shards) < 1 << 31 else np.int64)

    def read_lengths(self, out: np.ndarray | None = None) -> np.ndarray:
        """Document lengths read in chunks from the ``.idx`` files into ``out`` (new if None); not kept.

        The files are read, not memory-mapped, so their pages do not stay in the process.
        """
        out = np.empty(self.n_docs, self.lengths_dtype) if out is None else out
        pos = 0
        for shard in self.shards:
            _read_shard_lengths(shard, out[pos:pos + shard.n_docs])
            pos += shard.n_docs
        return out

    def __len__(self) -> int:
        return self.n_docs

    def __getitem__(self, i) -> dict:
        if not isinstance(i, (int, np.integer)):
            raise TypeError(f"ShardSet indices must be integers, not {type(i).__name__}")
        shard, j = self._locate(int(i))
        docs = shard.docs
        return {
            "input_ids": self._slice(shard.ids, shard, j),
            "loss_mask": self._mask(shard, j),
            "loss_weights": self._weights(shard, j),
            "id": docs.column(0)[j].as_py(),
            "source": docs.column(1)[j].as_py(),
        }

    def doc_tokens(self, i: int) -> np.ndarray:
        """The token ids of document ``i`` as a view into the memory-mapped shard."""
        shard, j = self._locate(int(i))
        return self._slice(shard.ids, shard, j)

    def doc_mask(self, i: int) -> np.ndarray | None:
        """The loss mask of document ``i`` as a bool view, or None when the shards carry no mask."""
        return self._mask(*self._locate(int(i)))

    def _mask(self, shard: Shard, j: int) -> np.ndarray | None:
        mask = shard.mask
        return None if mask is None else self._slice(mask, shard, j).view(np.bool_)

    def doc_weights(self, i: int) -> np.ndarray | None:
        """Per-token loss weights of document ``i`` (float32), or None when no shard of the set has weights.

        A document of a shard without a weights file gets its mask as weights (1.0 trained, 0.0 not).
        """
        return self._weights(*self._locate(int(i)))

    def _weights(self, shard: Shard, j: int) -> np.ndarray | None:
        if not self.has_weights:
            return None
        weights, mask = shard.weights, shard.mask
        if weights is not None:
            return self._slice(weights, shard, j)
        return None if mask is None else self._slice(mask, shard, j).astype(WEIGHT_DTYPE)  # weights need a mask

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Ids of the global token range ``[start, stop)`` (a view inside one shard, else a copy)."""
        return self._token_range("ids", start, stop)

    def mask_range(self, start: int, stop: int) -> np.ndarray | None:
        """Loss mask of the global token range ``[start, stop)`` as bool, or None without masks."""
        return self._token_range("mask", start, stop).view(np.bool_) if self.has_mask else None

    def _locate(self, i: int) -> tuple[Shard, int]:
        n = self.n_docs
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"document index {i} out of range for {n} documents in {self.directory}")
        k = int(np.searchsorted(self._doc_ends, i, side="right"))
        return self.shards[k], i - int(self._doc_ends[k] - self.shards[k].n_docs)

    @staticmethod
    def _slice(array: np.ndarray, shard: Shard, j: int) -> np.ndarray:
        offsets = shard.offsets
        return array[int(offsets[j]) : int(offsets[j + 1])]

    def _token_range(self, kind: str, start: int, stop: int) -> np.ndarray:
        if not 0 <= start <= stop <= self.n_tokens:
            raise IndexError(f"token range [{start}, {stop}) outside the {self.n_tokens} tokens of {self.directory}")
        first = int(np.searchsorted(self._tok_ends, start, side="right"))
        pieces = []
        for k in range(first, len(self.shards)):
            base = int(self._tok_ends[k]) - self.shards[k].n_tokens
            if base >= stop:
                break
            array = getattr(self.shards[k], kind)
            pieces.append(array[max(start - base, 0) : min(stop - base, self.shards[k].n_tokens)])
        if len(pieces) == 1:
            return pieces[0]
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=self.dtype if kind == "ids" else np.uint8)


_CHUNK = 1 << 16  # offsets per read: 512 KiB


def _read_shard_lengths(shard: Shard, out: np.ndarray) -> None:
    """``diff`` of the shard's ``.idx`` offsets written into ``out``, one ``_CHUNK`` at a time."""
    if shard.n_docs == 0:
        return
    with open(shard.path("idx"), "rb") as fh:
        prev = np.fromfile(fh, dtype="<i8", count=1)
        for lo in range(0, shard.n_docs, _CHUNK):
            offsets = np.fromfile(fh, dtype="<i8", count=min(_CHUNK, shard.n_docs - lo))
            np.subtract(offsets[1:], offsets[:-1], out=out[lo + 1:lo + offsets.size], casting="unsafe")
            out[lo] = offsets[0] - prev[0]
            prev = offsets[-1:]


def open_shards(directory: str | os.PathLike, *, tokenizer=None, verify: bool = False,
                storage_options: dict | None = None, allow_partial: bool = False) -> ShardSet:
    """Open every shard header in ``directory`` (sorted by name) as one ShardSet.

    ``tokenizer``: None, any spec ``--tokenizer`` accepts (hub name, directory, file, ``"default"``), a
    tokenizer object (``transformers``, ``tokenizers``, tokenmill), or a fingerprint string; a mismatch
    raises ShardError. ``verify=True`` also checks checksums and contents (reads every byte). ``directory``
    may be the ``s3://`` URL of a finished run, read from a local copy kept up to date
    (:func:`tokenmill.engine.store.local_copy`; endpoint and credentials from the environment or from
    ``storage_options``, as fsspec takes them).

    A run writes its ``manifest.json`` last: a run directory (it holds ``_state/``) without one is
    unfinished (killed, or still running) and holds only the shards of its finished units, so it is
    refused unless ``allow_partial=True``.
    """
    directory = readable(directory, storage_options=storage_options)
    if not directory.is_dir():
        raise ShardError(f"shard directory {directory} does not exist or is not a directory")
    if not allow_partial and is_unfinished(directory):
        raise ShardError(unfinished_message(directory))
    headers = shard_headers(directory)
    shards = [Shard(directory, p.name[: -len(".json")], h) for p, h in headers]
    missing = inventory_problems(directory, headers)  # no shard may vanish without a word
    if missing:
        raise ShardError(f"shards in {directory} do not add up:\n" + "\n".join(f"  - {p}" for p in missing))
    if not shards:
        raise ShardError(no_shards(directory))
    for shard in shards:
        _check_shard(shard)
    _check_consistent(shards, directory)
    _check_fingerprint(shards[0].header, tokenizer, directory)
    if verify:
        problems = verify_shards(directory)
        if problems:
            raise ShardError(f"shards in {directory} failed verification:\n" + "\n".join(f"  - {p}" for p in problems))
    shard_set = ShardSet(directory, shards, _read_manifest(directory))
    shard_set.allow_partial = allow_partial
    return shard_set


def is_unfinished(directory: Path) -> bool:
    """A run directory (``_state/``) whose ``manifest.json``, written last, is not there."""
    return (directory / "_state").is_dir() and not (directory / "manifest.json").is_file()


def unfinished_message(directory: Path) -> str:
    return (f"{directory} is an unfinished run: its manifest.json, written last, is missing (the run was "
            "killed or is still running), so it holds only the shards of the units that finished. Run the same "
            "command again to finish it, or pass allow_partial=True to read what is there")


def _reopen(directory: str, fingerprint: str, allow_partial: bool = False) -> ShardSet:
    return open_shards(directory, tokenizer=fingerprint, allow_partial=allow_partial)


def _check_shard(shard: Shard) -> None:
    version = shard.header.get("format_version")
    if version not in KNOWN_VERSIONS:
        raise ShardError(
            f"shard {shard.path('json')} has format_version {version!r}; this tokenmill reads versions "
            f"{', '.join(map(str, KNOWN_VERSIONS))}: upgrade tokenmill or rewrite the shards"
        )
    if shard.has_weights and not shard.has_mask:
        raise ShardError(f"shard {shard.path('json')} has loss weights but no mask; the shard is corrupt")
    for suffix, size in shard.expected_sizes().items():
        path = shard.path(suffix)
        actual = path.stat().st_size if path.is_file() else None
        if actual != size:
            found = "is missing" if actual is None else f"has {actual} bytes"
            raise ShardError(f"{path} {found}, its header expects {size} bytes; the shard is incomplete or corrupt")
    if not shard.path("docs").is_file():
        raise ShardError(f"{shard.path('docs')} is missing; the shard is incomplete")


def _check_consistent(shards: list[Shard], directory: Path) -> None:
    first = shards[0]
    for shard in shards[1:]:
        differ = [k for k in COMMON_FIELDS if shard.header.get(k) != first.header.get(k)]
        if differ:
            details = ", ".join(f"{k}: {first.header.get(k)!r} vs {shard.header.get(k)!r}" for k in differ)
            raise ShardError(
                f"shards {first.stem} and {shard.stem} in {directory} disagree ({details}); "
                "a directory must hold shards of one run: move the odd ones to their own directory"
            )


def _check_fingerprint(header: dict, tokenizer, directory: Path) -> None:
    if tokenizer is None:
        return
    expected = fingerprint_of(tokenizer)  # any spec --tokenizer takes, an object, or a fingerprint
    found = header["tokenizer_fingerprint"]
    if expected != found:
        info = {"name": header["tokenizer"], **(header.get("tokenizer_info") or {})}
        raise ShardError(
            f"shards in {directory} were written with tokenizer {recorded(info)} (fingerprint {found[:12]}), "
            f"but the tokenizer given ({describe(tokenizer)}) has fingerprint {expected[:12]}: another vocabulary; "
            "use the tokenizer the shards were made with or re-tokenize the data"
        )


def _read_manifest(directory: Path) -> dict:
    path = directory / "manifest.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_bytes())
    except ValueError as exc:
        raise ShardError(f"{path} is not valid JSON ({exc}); rewrite or remove it") from exc
