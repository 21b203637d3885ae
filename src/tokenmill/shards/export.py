"""Exporters from token shards to other trainers' formats: Megatron-LM, HF ``datasets``, flat ``.bin``.

Every exporter consumes the same stream of bounded batches (about 16 M tokens each), so memory stays
flat whatever the corpus size. Without ``seq_len`` a document is one sequence; with ``seq_len`` the
token stream (documents already end in EOS) is cut into fixed windows by ``tokenmill.pack.concat_chunk``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokenmill._extras import require
from tokenmill.engine.outdir import STATE, check_output_path, hold_output, hold_path, read_record, written_by
from tokenmill.engine.store import is_remote
from tokenmill.errors import ConfigError, ShardError
from tokenmill.pack import concat_chunk
from tokenmill.shards.checked import verify_checksums
from tokenmill.shards.export_record import RECORD_SUFFIXES, write_file_record, write_record
from tokenmill.shards.export_remote import export_remote
from tokenmill.shards.pairs_export import check_export, pair_tables
from tokenmill.shards.reader import ShardSet, open_shards

BATCH_TOKENS = 1 << 24
MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}  # Megatron-LM DType enum values
IGNORE_INDEX = -100


@dataclass
class Batch:
    """Consecutive sequences: ``ids[offsets[k]:offsets[k+1]]`` is sequence k."""

    ids: np.ndarray
    offsets: np.ndarray
    mask: np.ndarray | None
    rec_ids: pa.Array | None = None
    sources: pa.Array | None = None


def export(directory: str | os.PathLike, *, to: str, out: str | os.PathLike, seq_len: int | None = None,
           overwrite: bool = False, dry_run: bool = False) -> dict:
    """Export the shards of ``directory`` to ``to`` ("megatron", "hf" or "bin") at ``out``; returns a summary
    (with ``dry_run``: what would be written, after every refusal, writing nothing).

    Nothing is written over what the export did not write: an existing target is refused unless
    ``overwrite``, and even then only a target of the same format (:func:`check_target`). The target is held
    as every ``--out`` is (one run at a time, ``engine/outdir.py``): an ``hf`` directory by ``hold_output``
    (``--overwrite`` removes exactly what the earlier export wrote, a user's files stay), the files of
    ``bin`` and ``megatron`` by a lock beside them. An ``s3://`` target is written locally, then uploaded
    (``shards/export_remote.py``: the same refusals against the bucket's objects).
    Every file is written under a temporary name and renamed once whole; a run killed midway leaves an
    unfinished export (:func:`unfinished`), which the same command again, with no ``--overwrite``, does again:
    the same bytes. Beside the files of ``bin`` and ``megatron`` go the export's manifest envelope and data card
    (``OUT.manifest.json``, ``OUT.datacard.json``, ``OUT.datacard.md``: ``shards/export_record.py``); the ``hf``
    folder holds its own.
    """
    started = time.monotonic()
    writers = {"megatron": _to_megatron, "hf": _to_hf, "bin": _to_bin}
    if to not in writers:
        raise ConfigError(f"unknown export format {to!r}; choose one of {sorted(writers)}")
    if seq_len is not None and seq_len <= 0:
        raise ConfigError(f"seq_len must be a positive number of tokens, got {seq_len}")
    remote = is_remote(out)
    ds = open_shards(directory)
    verify_checksums(ds)  # once per file, cached by size and mtime
    if (ds.manifest or {}).get("track") == "pref":  # pairs: TRL's tokenized columns (pairs_export.py)
        check_export(to, seq_len)
    if seq_len is not None and seq_len > ds.n_tokens:
        raise ConfigError(f"seq_len {seq_len:,} is longer than all {ds.n_tokens:,} tokens of {directory}: not one "
                          "sample could be written; give a shorter --seq-len or export without it")
    if remote:
        return export_remote(directory, to=to, url=str(out), seq_len=seq_len, overwrite=overwrite, dry_run=dry_run,
                             local_export=functools.partial(export, directory, to=to, seq_len=seq_len))
    out = Path(out)
    if to == "hf":  # a directory: never the input, never holding it, never inside it
        check_output_path(out, [str(directory)])
    if to == "megatron":
        _refuse_masks(ds)
    check_target(to, out, overwrite=overwrite or unfinished(to, out))  # every refusal before anything is written
    if dry_run:
        return {"format": to, "seq_len": seq_len, "dry_run": True, **planned(ds, to, out, seq_len)}
    if to == "hf":
        again = overwrite or unfinished(to, out)  # a killed export is done again: its record is still open
        with hold_output(out, overwrite=again, workflow="export"):
            check_target(to, out, overwrite=again)  # again under the lock: what a run just finished left
            summary = _to_hf(ds, out, seq_len)
            write_record(out, ds, Path(directory), summary, seq_len=seq_len, started=started)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        with hold_path(out):
            check_target(to, out, overwrite=overwrite or unfinished(to, out))  # under the lock: a dead run's .tmp
            summary = writers[to](ds, out, seq_len)
            record = write_file_record(out, ds, Path(directory), summary, to=to, seq_len=seq_len, started=started,
                                       at=_tmp)
            _publish([*summary["paths"], *record])
            summary["paths"] = [*summary["paths"], *record]
    return {"format": to, "seq_len": seq_len, **summary}


def unfinished(to: str, out: Path) -> bool:
    """Whether ``out`` holds an export killed before its end, which the next export of that format does again
    (no ``--overwrite`` needed): an ``hf`` directory whose record of written files is still open
    (``engine/outdir.py``), or a file export with a temporary file left (a target file is renamed from its
    ``.tmp`` once whole, the format's record first, so a kill between two renames leaves one). Asked again
    under the target's lock, where a record still open or a ``.tmp`` is a dead run's, never a live one's."""
    if to == "hf":
        return out.is_dir() and written_by(out) == "export" and "open" in (read_record(out) or {})
    return any(_tmp(p).is_file() for p in targets(to, out))


def iter_batches(ds: ShardSet, *, seq_len: int | None, batch_tokens: int = BATCH_TOKENS):
    """Bounded batches of whole documents (``seq_len`` None) or of fixed ``seq_len`` windows."""
    if seq_len is None:
        yield from _doc_batches(ds, batch_tokens)
    else:
        yield from _window_batches(ds, seq_len, batch_tokens)


def _doc_batches(ds: ShardSet, batch_tokens: int):
    for shard in ds.shards:
        offsets, shard_mask = np.asarray(shard.offsets), shard.mask
        a = 0
        while a < shard.n_docs:
            b = int(np.searchsorted(offsets, offsets[a] + batch_tokens, side="right")) - 1
            b = min(max(b, a + 1), shard.n_docs)
            lo, hi = int(offsets[a]), int(offsets[b])
            mask = None if shard_mask is None else shard_mask[lo:hi]
            yield Batch(shard.ids[lo:hi], offsets[a : b + 1] - lo, mask, shard.docs.column(0).slice(a, b - a),
                        shard.docs.column(1).slice(a, b - a))  # fmt: skip
            a = b


def _window_batches(ds: ShardSet, seq_len: int, batch_tokens: int):
    starts = np.asarray(concat_chunk(ds.lengths, seq_len, drop_last=True), dtype=np.int64)
    per_batch = max(1, batch_tokens // seq_len)
    for k in range(0, len(starts), per_batch):
        chunk = starts[k : k + per_batch]
        stops = np.minimum(chunk + seq_len, ds.n_tokens)
        offsets = np.concatenate([[0], np.cumsum(stops - chunk)])
        mask = _gather(ds.mask_range, chunk, stops) if ds.has_mask else None
        yield Batch(_gather(ds.tokens, chunk, stops), offsets, mask)


def _gather(read, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Windows ``[starts[k], stops[k])`` concatenated; one read when they are back to back."""
    if np.array_equal(starts[1:], stops[:-1]):
        return read(int(starts[0]), int(stops[-1]))
    return np.concatenate([read(int(a), int(b)) for a, b in zip(starts, stops)])


def planned(ds: ShardSet, to: str, out: Path, seq_len: int | None) -> dict:
    """What an export would write: its paths, sequences and tokens (from the shard headers, nothing read)."""
    paths = [str(p) for p in targets(to, out) if not (p.name.endswith(".mask") and not ds.has_mask)]
    if seq_len is None:
        return {"paths": paths, "n_sequences": len(ds.lengths), "n_tokens": int(ds.n_tokens)}
    n = len(concat_chunk(ds.lengths, seq_len, drop_last=True))
    return {"paths": paths, "n_sequences": n, "n_tokens": n * seq_len}


def targets(to: str, out: Path) -> list[Path]:
    """The paths an export to ``to`` at ``out`` writes (a directory for hf)."""
    record = [Path(f"{out}{suffix}") for suffix in RECORD_SUFFIXES]  # the envelope and the data card
    if to == "megatron":
        return [Path(f"{out}.bin"), Path(f"{out}.idx"), *record]
    if to == "bin":
        return [out, Path(f"{out}.json"), Path(f"{out}.mask"), *record]
    return [out]


def check_target(to: str, out: Path, *, overwrite: bool) -> None:
    """Refuse to write over anything the export did not write.

    ``bin`` and ``megatron`` write files: an existing directory at one of their paths is refused; an existing
    file is replaced only with ``overwrite`` and when it is of that format (a ``tokenmill-bin`` sidecar, a
    Megatron index header). ``hf`` writes a directory: one holding files is written into only with
    ``overwrite`` and when a tokenmill export wrote it (``_state/job.json``).
    """
    if to == "hf":
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out} is a file; export --to hf writes a directory: give a new directory path")
        if out.is_dir() and [e for e in out.iterdir() if e.name != STATE]:
            if not overwrite or written_by(out) != "export":
                why = "pass --overwrite to replace it" if written_by(out) == "export" else \
                    "it was not written by `tokenmill export --to hf`"
                raise ConfigError(f"--out {out} is not empty; export --to hf writes a directory of its own ({why}): "
                                  "choose a new directory")
        return
    for path in targets(to, out):
        if path.is_dir():
            raise ConfigError(f"--out {out}: {path} is a directory; export --to {to} writes files "
                              f"({', '.join(p.name for p in targets(to, out))}): give a file path, e.g. {path / 'tokens'}")
    existing = [p for p in targets(to, out) if p.exists()]
    if existing and not overwrite:
        raise ConfigError(f"--out {out}: {existing[0]} exists; pass --overwrite to replace an earlier export, or choose "
                          "another path")
    if existing and not _own_export(to, out):
        raise ConfigError(f"--out {out}: {existing[0]} exists and is not a {to} export; --overwrite replaces only an "
                          "earlier export of the same format: choose another path")


def _own_export(to: str, out: Path) -> bool:
    try:
        if to == "bin":
            return json.loads(Path(f"{out}.json").read_text()).get("format") == "tokenmill-bin"
        with open(f"{out}.idx", "rb") as fh:
            return fh.read(len(MEGATRON_HEADER)) == MEGATRON_HEADER
    except (OSError, ValueError, AttributeError):
        return False


def _refuse_masks(ds: ShardSet) -> None:
    if ds.has_mask:
        raise ShardError(
            f"shards in {ds.directory} carry loss masks, which Megatron's IndexedDataset cannot hold; "
            "export them with to='hf' (labels) or to='bin' (mask file)"
        )


def _tmp(path: str | Path) -> Path:
    """Where a target file is written before it is whole (renamed by :func:`_publish`)."""
    return Path(f"{path}.tmp")


def _publish(paths: list[str]) -> None:
    """Rename the finished temporary files to their targets, the records (``.json``, ``.idx``) first and the
    format's own (what :func:`_own_export` reads) first of all: a run killed between two renames leaves a ``.tmp``,
    so the next export of the format does it again (:func:`unfinished`)."""
    for path in sorted(paths, key=lambda p: not p.endswith((".json", ".idx"))):
        os.replace(_tmp(path), path)


def _to_megatron(ds: ShardSet, out: Path, seq_len: int | None) -> dict:
    _refuse_masks(ds)
    dtype = np.dtype(np.uint16) if ds.dtype.itemsize == 2 else np.dtype(np.int32)
    lengths = []
    with open(_tmp(f"{out}.bin"), "wb") as fh:
        for batch in iter_batches(ds, seq_len=seq_len):
            fh.write(np.ascontiguousarray(batch.ids.astype(dtype, copy=False)).data.cast("B"))
            lengths.append(np.diff(batch.offsets))
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    write_megatron_index(_tmp(f"{out}.idx"), lengths, dtype)
    return {"paths": [f"{out}.bin", f"{out}.idx"], "n_sequences": len(lengths), "n_tokens": int(lengths.sum())}


def write_megatron_index(path: Path, lengths: np.ndarray, dtype: np.dtype) -> None:
    """Megatron-LM ``.idx``: header, version 1, dtype code, counts, int32 lengths, int64 byte pointers,
    int64 document indices (one sequence per document)."""
    if len(lengths) and int(lengths.max()) >= 1 << 31:
        raise ShardError("a sequence is longer than 2**31 tokens, beyond Megatron's int32 sequence lengths")
    pointers = np.zeros(len(lengths), dtype="<i8")
    np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    doc_index = np.arange(len(lengths) + 1, dtype="<i8")
    with open(path, "wb") as fh:
        fh.write(MEGATRON_HEADER + struct.pack("<Q", 1) + struct.pack("<B", MEGATRON_CODES[dtype]))
        fh.write(struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(doc_index)))
        fh.write(lengths.astype("<i4").tobytes())
        fh.write(pointers.tobytes())
        fh.write(doc_index.tobytes())


def bin_dtype(vocab_size: int) -> np.dtype:
    """uint16 whenever every id fits (vocab_size <= 65,536: what nanoGPT's loader reads), else uint32."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def bin_note(dtype: np.dtype, vocab_size: int) -> str:
    """What a reader of the flat file must know about its dtype (said in the sidecar and by the command)."""
    if dtype.itemsize == 2:
        return "uint16, as nanoGPT's loader reads it: np.memmap(path, dtype=np.uint16, mode='r')"
    return (f"uint32: a vocabulary of {vocab_size:,} ids does not fit in uint16; nanoGPT's train.py hard-codes "
            "np.uint16, change it to np.memmap(path, dtype=np.uint32, mode='r')")


def _to_bin(ds: ShardSet, out: Path, seq_len: int | None) -> dict:
    n_seq = n_tok = 0
    dtype = bin_dtype(ds.vocab_size)
    mask_path = Path(f"{out}.mask") if ds.has_mask else None
    with open(_tmp(out), "wb") as fh, open(_tmp(mask_path) if mask_path else os.devnull, "wb") as mh:
        for batch in iter_batches(ds, seq_len=seq_len):
            fh.write(np.ascontiguousarray(batch.ids.astype(dtype, copy=False)).data.cast("B"))
            if batch.mask is not None:
                mh.write(np.ascontiguousarray(batch.mask).view(np.uint8).data.cast("B"))
            n_seq, n_tok = n_seq + len(batch.offsets) - 1, n_tok + len(batch.ids)
    note = bin_note(dtype, ds.vocab_size)
    sidecar = {
        "format": "tokenmill-bin", "dtype": dtype.name, "dtype_note": note, "byte_order": "little",
        "n_tokens": n_tok, "n_sequences": n_seq, "seq_len": seq_len, "vocab_size": ds.vocab_size,
        "bos_id": ds.bos_id, "eos_id": ds.eos_id, "pad_id": ds.pad_id, "tokenizer": ds.tokenizer_name,
        "tokenizer_fingerprint": ds.fingerprint, "mask_file": mask_path.name if mask_path else None,
    }  # fmt: skip
    _tmp(f"{out}.json").write_text(json.dumps(sidecar, indent=2) + "\n")
    paths = [str(out), f"{out}.json"] + ([str(mask_path)] if mask_path else [])
    return {"paths": paths, "n_sequences": n_seq, "n_tokens": n_tok, "dtype": dtype.name, "dtype_note": note}


def _to_hf(ds: ShardSet, out: Path, seq_len: int | None) -> dict:
    """Write the dataset in ``out/_state/`` (an Arrow stream, then ``save_to_disk``), then move its files into
    ``out``: a run killed midway leaves its partial files where ``--overwrite`` always removes them, and
    nothing is ever written beside ``out``."""
    datasets = require("datasets", "hf", "export shards as a Hugging Face dataset")
    tmp = Path(tempfile.mkdtemp(prefix="export-hf-", dir=out / STATE))
    try:
        n_seq, n_tok = _write_arrow_stream(ds, tmp / "data.arrow", seq_len)
        with _quiet_datasets(datasets):
            dataset = datasets.Dataset.from_file(str(tmp / "data.arrow"))
            dataset.save_to_disk(str(tmp / "dataset"))
            del dataset
        for path in sorted((tmp / "dataset").iterdir()):
            os.replace(path, out / path.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"paths": [str(out)], "n_sequences": n_seq, "n_tokens": n_tok}


@contextlib.contextmanager
def _quiet_datasets(datasets: Any):
    """No progress bars of ``datasets`` over tokenmill's own output (restored afterwards, as the caller had them)."""
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def _write_arrow_stream(ds: ShardSet, path: Path, seq_len: int | None) -> tuple[int, int]:
    n_seq = n_tok = 0
    writer = None
    with pa.OSFile(str(path), "wb") as sink:
        for table, tokens in _hf_tables(ds, seq_len):
            writer = writer or pa.ipc.new_stream(sink, table.schema)
            writer.write_batch(table)
            n_seq, n_tok = n_seq + table.num_rows, n_tok + tokens
        if writer is None:
            raise ShardError(f"shards in {ds.directory} hold no sequences to export (seq_len={seq_len})")
        writer.close()
    return n_seq, n_tok


def _hf_tables(ds: ShardSet, seq_len: int | None):
    """(record batch, tokens in it) of the dataset's rows: sequences, or a pref output's pairs."""
    if (ds.manifest or {}).get("track") == "pref":
        yield from pair_tables(ds)
        return
    for batch in iter_batches(ds, seq_len=seq_len):
        yield _hf_batch(batch), len(batch.ids)


def _hf_batch(batch: Batch) -> pa.RecordBatch:
    offsets = pa.array(batch.offsets.astype(np.int32))
    ids = batch.ids.astype(np.int32)
    columns = {"input_ids": pa.ListArray.from_arrays(offsets, pa.array(ids))}
    if batch.mask is not None:
        labels = np.where(batch.mask.view(np.bool_), ids, IGNORE_INDEX).astype(np.int32)
        columns["labels"] = pa.ListArray.from_arrays(offsets, pa.array(labels))
    if batch.rec_ids is not None:
        columns["id"], columns["source"] = batch.rec_ids, batch.sources
    return pa.record_batch(list(columns.values()), names=list(columns))
