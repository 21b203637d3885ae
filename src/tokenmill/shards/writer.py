"""ShardWriter: streams whole documents into shards of at most ``max_tokens`` tokens."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from tokenmill.errors import ShardError
from tokenmill.shards.format import WEIGHT_DTYPE, build_header, dump_json, normalize_tokenizer_info, token_dtype

DOCS_SCHEMA = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("source", pa.string(), nullable=False)])
_FLUSH_RECORDS = 1 << 16
_BACKFILL = 1 << 24  # mask bytes turned into weights at a time when a shard's first weighted document arrives


class _HashedFile:
    """A binary file written through a sha256 hasher, renamed into place on commit."""

    def __init__(self, path: Path):
        self.path, self.tmp = path, path.with_name(path.name + ".tmp")
        self.fh = open(self.tmp, "wb")
        self.hash = hashlib.sha256()

    def write(self, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array).data.cast("B")
        self.fh.write(data)
        self.hash.update(data)

    def written(self) -> np.ndarray:
        """The bytes written so far, memory-mapped (uint8)."""
        self.fh.flush()
        size = self.tmp.stat().st_size
        return np.memmap(self.tmp, dtype=np.uint8, mode="r", shape=(size,)) if size else np.zeros(0, np.uint8)

    def commit(self) -> str:
        self.fh.close()
        os.replace(self.tmp, self.path)
        return self.hash.hexdigest()

    def discard(self) -> None:
        self.fh.close()
        self.tmp.unlink(missing_ok=True)


class _Part:
    """The shard being filled: ids/mask files open, lengths and records buffered."""

    def __init__(self, directory: Path, stem: str, *, with_mask: bool):
        self.directory, self.stem = directory, stem
        self.ids = _HashedFile(directory / f"{stem}.ids")
        self.mask = _HashedFile(directory / f"{stem}.mask") if with_mask else None
        self.weights: _HashedFile | None = None  # opened by the first document that carries weights
        self.n_tokens = self.n_trained = 0
        self.lengths: list[np.ndarray] = []
        self.rec_ids: list[pa.Array] = []
        self.sources: list[pa.Array] = []
        self.pending_ids: list[str] = []
        self.pending_sources: list[str] = []

    def flush_records(self) -> None:
        if self.pending_ids:
            self.rec_ids.append(pa.array(self.pending_ids, pa.string()))
            self.sources.append(pa.array(self.pending_sources, pa.string()))
            self.pending_ids, self.pending_sources = [], []

    def start_weights(self) -> None:
        """Open the weights file; the tokens already written get their mask (0/1) as weight."""
        if self.mask is None:
            raise ShardError("loss weights need a loss mask: write these shards with with_mask=True")
        self.weights = _HashedFile(self.directory / f"{self.stem}.weights")
        written = self.mask.written()
        for lo in range(0, len(written), _BACKFILL):
            self.weights.write(written[lo:lo + _BACKFILL].astype(WEIGHT_DTYPE))

    def finish(self, info: dict) -> None:
        self.flush_records()
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype="<i8")
        np.cumsum(lengths, out=offsets[1:])
        checksums = {f"{self.stem}.ids": self.ids.commit()}
        if self.mask is not None:
            checksums[f"{self.stem}.mask"] = self.mask.commit()
        if self.weights is not None:
            checksums[f"{self.stem}.weights"] = self.weights.commit()
        checksums[f"{self.stem}.idx"] = _write_bytes(self.directory / f"{self.stem}.idx", offsets.tobytes())
        checksums[f"{self.stem}.docs"] = _write_bytes(self.directory / f"{self.stem}.docs", self._docs_bytes())
        n_trained = self.n_trained if self.mask is not None else self.n_tokens
        header = build_header(
            info=info, stem=self.stem, n_docs=len(lengths), n_tokens=self.n_tokens,
            n_trained=n_trained, has_mask=self.mask is not None, checksums=checksums,
            has_weights=self.weights is not None,
        )  # fmt: skip
        _write_bytes(self.directory / f"{self.stem}.json", dump_json(header))

    def _docs_bytes(self) -> bytes:
        ids = pa.concat_arrays(self.rec_ids) if self.rec_ids else pa.array([], pa.string())
        sources = pa.concat_arrays(self.sources) if self.sources else pa.array([], pa.string())
        batch = pa.record_batch([ids, sources], schema=DOCS_SCHEMA)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, DOCS_SCHEMA) as writer:
            writer.write_batch(batch)
        return sink.getvalue().to_pybytes()


def _write_bytes(path: Path, data: bytes) -> str:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


class ShardWriter:
    """Writes documents into ``<stem_prefix>-<part:04d>`` shards; a document is never split.

    A document longer than ``max_tokens`` gets a shard of its own. Files are written under temporary
    names and renamed; the ``.json`` header comes last, so a shard with a header is complete.
    Per-token loss weights (``weights=`` / ``flat_weights=``, masked writers only) go to a ``.weights``
    file, opened by the first document of a shard that carries them; shards without any stay version 1.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        stem_prefix: str,
        tokenizer_info: dict,
        max_tokens: int = 1 << 28,
        with_mask: bool = False,
    ):
        if max_tokens <= 0:
            raise ShardError(f"max_tokens must be positive, got {max_tokens}")
        if not stem_prefix or "/" in stem_prefix or os.sep in stem_prefix:
            raise ShardError(f"stem_prefix must be a plain file-name prefix, got {stem_prefix!r}")
        self.directory = Path(directory)
        self.stem_prefix, self.max_tokens, self.with_mask = stem_prefix, int(max_tokens), with_mask
        self.info = normalize_tokenizer_info(tokenizer_info)
        self.dtype = token_dtype(self.info["vocab_size"])
        self._part: _Part | None = None
        self._stems: list[str] = []
        self._closed = False

    def __getstate__(self) -> dict:
        if self._part is not None or self._stems:
            raise ShardError("a ShardWriter can be pickled only before its first add(); pickle its arguments instead")
        return dict(self.__dict__)

    def add(self, ids: np.ndarray, *, rec_id: str, source: str, mask: np.ndarray | None = None,
            weights: np.ndarray | None = None) -> None:
        """Append one document; ``weights``: float loss weight per token (None = its mask, 0 or 1)."""
        ids = np.asarray(ids)
        offsets = np.array([0, len(ids)], dtype=np.int64)
        self.add_many(ids, offsets, rec_ids=[rec_id], sources=[source], flat_mask=mask, flat_weights=weights)

    def add_many(
        self,
        flat_ids: np.ndarray,
        offsets: np.ndarray,
        *,
        rec_ids: list[str],
        sources: list[str],
        flat_mask: np.ndarray | None = None,
        flat_weights: np.ndarray | None = None,
    ) -> None:
        """Append documents ``flat_ids[offsets[i]:offsets[i+1]]``; ``offsets`` has n_docs + 1 entries from 0."""
        flat_ids, offsets = np.asarray(flat_ids), np.asarray(offsets, dtype=np.int64)
        self._check_batch(flat_ids, offsets, rec_ids, sources)
        mask = self._mask_bytes(flat_mask, len(flat_ids))
        weights = self._weight_values(flat_weights, mask)
        start, n = 0, len(rec_ids)
        while start < n:
            part = self._current_part()
            room = self.max_tokens - part.n_tokens
            fit = int(np.searchsorted(offsets[start + 1 :], offsets[start] + room, side="right"))
            if fit == 0 and part.n_tokens == 0:
                fit = 1  # a document longer than max_tokens: a shard of its own
            if fit == 0:
                self._finish_part()
                continue
            self._append(part, flat_ids, (mask, weights), offsets, start, start + fit, rec_ids, sources)
            start += fit

    def close(self) -> list[str]:
        """Finish the last shard; returns the stems written, in order."""
        if not self._closed:
            if self._part is not None:
                self._finish_part()
            self._closed = True
        return list(self._stems)

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def abort(self) -> None:
        """Drop the shard being filled (its temporary files); shards already finished stay."""
        if self._part is not None:
            for f in (self._part.ids, self._part.mask, self._part.weights):
                if f is not None:
                    f.discard()
            self._part = None
        self._closed = True

    def _check_batch(self, flat_ids: np.ndarray, offsets: np.ndarray, rec_ids: list, sources: list) -> None:
        if self._closed:
            raise ShardError(f"ShardWriter for {self.directory} is closed; open a new one to add documents")
        if flat_ids.ndim != 1 or flat_ids.dtype.kind not in "iu":
            raise ShardError(f"token ids must be a 1-D integer array, got {flat_ids.dtype} with shape {flat_ids.shape}")
        if len(rec_ids) != len(sources) or len(offsets) != len(rec_ids) + 1:
            raise ShardError(
                f"add_many needs len(offsets) == len(rec_ids) + 1 == len(sources) + 1, "
                f"got {len(offsets)}, {len(rec_ids)}, {len(sources)}"
            )
        if offsets[0] != 0 or offsets[-1] != len(flat_ids) or (np.diff(offsets) < 0).any():
            raise ShardError(f"offsets must rise from 0 to len(flat_ids)={len(flat_ids)}, got {offsets[:3]}...")
        if len(flat_ids) and (int(flat_ids.min()) < 0 or int(flat_ids.max()) >= self.info["vocab_size"]):
            raise ShardError(
                f"token ids must lie in [0, {self.info['vocab_size']}) for tokenizer {self.info['name']!r}; "
                f"got min {int(flat_ids.min())}, max {int(flat_ids.max())}"
            )

    def _mask_bytes(self, flat_mask: np.ndarray | None, n_tokens: int) -> np.ndarray | None:
        if not self.with_mask:
            if flat_mask is not None:
                raise ShardError("a loss mask was given to a ShardWriter made with with_mask=False")
            return None
        if flat_mask is None:
            return np.ones(n_tokens, dtype=np.uint8)  # no mask given: every token trained
        flat_mask = np.asarray(flat_mask)
        if flat_mask.shape != (n_tokens,):
            raise ShardError(f"loss mask shape {flat_mask.shape} does not match {n_tokens} token ids")
        return flat_mask.view(np.uint8) if flat_mask.dtype == np.bool_ else (flat_mask != 0).view(np.uint8)

    @staticmethod
    def _weight_values(flat_weights: np.ndarray | None, mask: np.ndarray | None) -> np.ndarray | None:
        """Checked float32 weights: finite, >= 0, zero exactly where the mask is 0."""
        if flat_weights is None:
            return None
        if mask is None:
            raise ShardError("loss weights need a ShardWriter made with with_mask=True (the mask says what is trained)")
        weights = np.asarray(flat_weights, dtype=WEIGHT_DTYPE)
        if weights.shape != mask.shape:
            raise ShardError(f"loss weights shape {weights.shape} does not match {len(mask)} token ids")
        if not np.isfinite(weights).all() or (weights < 0).any():
            raise ShardError("loss weights must be finite and >= 0")
        if ((weights > 0) != (mask != 0)).any():
            raise ShardError("loss weights must be > 0 exactly where the loss mask is 1 (0 weight = untrained)")
        return weights

    def _current_part(self) -> _Part:
        if self._part is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            stem = f"{self.stem_prefix}-{len(self._stems):04d}"
            self._part = _Part(self.directory, stem, with_mask=self.with_mask)
        return self._part

    def _finish_part(self) -> None:
        part = self._part
        if part is not None:
            part.finish(self.info)
            self._stems.append(part.stem)
        self._part = None

    def _append(self, part: _Part, ids, masks, offsets, lo: int, hi: int, rec_ids, sources) -> None:
        a, b = int(offsets[lo]), int(offsets[hi])
        mask, weights = masks
        part.ids.write(ids[a:b].astype(self.dtype, copy=False))
        if weights is not None and part.weights is None:
            part.start_weights()
        if part.weights is not None:
            part.weights.write(weights[a:b] if weights is not None else mask[a:b].astype(WEIGHT_DTYPE))
        if part.mask is not None:
            part.mask.write(mask[a:b])
            part.n_trained += int(np.count_nonzero(mask[a:b]))
        part.n_tokens += b - a
        part.lengths.append(np.diff(offsets[lo : hi + 1]))
        part.pending_ids.extend(rec_ids[lo:hi])
        part.pending_sources.extend(sources[lo:hi])
        if len(part.pending_ids) >= _FLUSH_RECORDS:
            part.flush_records()
