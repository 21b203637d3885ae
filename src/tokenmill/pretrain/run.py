"""``tokenmill pretrain``: route, read, tokenize, write token shards, account for every record.

Per work unit (in a worker process): read raw batches -> ``Document`` batches -> curation steps ->
``encode_batch`` (no special tokens; literal special-token strings stay text) -> ``[BOS] + ids + [EOS]``
(BOS only when the tokenizer's own config adds one) -> ``ShardWriter``. Shards are named after the unit,
so the output is the same whatever the number of workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tokenmill.errors import TokenizerError
from tokenmill.io import read_unit
from tokenmill.io.base import WorkUnit
from tokenmill.pretrain.documents import to_documents
from tokenmill.report.accounting import Stats
from tokenmill.report.rejects import RejectSink
from tokenmill.selection import dry_run_plan, take_records
from tokenmill.shards import ShardWriter
from tokenmill.track import TrackRun, prepare_run, finish_run

Step = Callable[[Any], tuple[Any, dict[str, int]]]


def frame(flat: np.ndarray, offsets: np.ndarray, *, bos: int | None, eos: int) -> tuple[np.ndarray, np.ndarray]:
    """Insert an optional BOS before and an EOS after every document of a flat id array.

    One slice copy per document into a preallocated array: no per-token index arrays, so the extra
    memory is the output itself (4 bytes per token), not several int64 temporaries.
    """
    n = len(offsets) - 1
    lead = 0 if bos is None else 1
    new_offsets = offsets + np.arange(n + 1, dtype=np.int64) * (lead + 1)
    out = np.empty(int(new_offsets[-1]), dtype=np.uint32)
    for i in range(n):
        a, b, at = int(offsets[i]), int(offsets[i + 1]), int(new_offsets[i])
        out[at + lead : at + lead + b - a] = flat[a:b]
    if bos is not None:
        out[new_offsets[:-1]] = bos
    out[new_offsets[1:] - 1] = eos
    return out, new_offsets


@dataclass(frozen=True)
class PretrainTask:
    """Everything one worker needs to turn one unit into shards. Picklable."""

    tokenizer: Any
    schemas: dict[str, dict]  # InputFile.rel -> router schema
    shard_tokens: int = 1 << 28
    text_mode: str = "auto"
    batch_rows: int = 512
    steps: Sequence[Step] = field(default_factory=tuple)
    limit: int | None = None  # first records of every input only (a trial run)

    def __call__(self, unit: WorkUnit, staging: Path) -> dict:
        tok = self.tokenizer
        stats = Stats()
        info = tok.info()
        writer = ShardWriter(staging, stem_prefix=f"shard-{unit.index:06d}", tokenizer_info=info,
                             max_tokens=self.shard_tokens)
        sink = RejectSink(staging, unit)
        bos = tok.bos_id if tok.add_bos else None
        for raw in take_records(read_unit(unit, batch_rows=self.batch_rows, text_mode=self.text_mode), self.limit):
            stats.input += len(raw) + len(raw.rejects)
            stats.bytes_in += raw.nbytes
            stats.extra.update({f"skipped:{k}": v for k, v in raw.skipped.items()})
            sink.add(raw.rejects, stats)
            docs, rejects = to_documents(raw, self.schemas.get(unit.file.rel, {}))
            sink.add(rejects, stats)
            for step in self.steps:
                docs, filtered = step(docs)
                for reason, count in filtered.items():
                    stats.filter(reason, count)
            if docs.num_rows == 0:
                continue
            flat, offsets = tok.encode_batch(docs.column("text").to_pylist())
            flat, offsets = frame(flat, offsets, bos=bos, eos=tok.eos_id)
            writer.add_many(flat, offsets, rec_ids=docs.column("id").to_pylist(),
                            sources=docs.column("source").to_pylist())
            stats.kept += docs.num_rows
            stats.tokens += int(offsets[-1])
        shards = writer.close()
        sink.close()
        return {"stats": stats.to_dict(), "shards": shards}


def run_pretrain(
    inputs: Sequence[str],
    *,
    out: str | Path,
    tokenizer: Any = "default",
    workers: int | None = None,
    force: bool = False,
    overwrite: bool = False,
    unit_bytes: int = 64 << 20,
    shard_tokens: int = 1 << 28,
    text_mode: str = "auto",
    steps: Sequence[Step] = (),
    progress: bool | None = None,
    schemas: dict[str, dict] | None = None,
    config: dict | None = None,
    exclude: Sequence[str] = (),
    skip_misrouted: bool = False,
    limit: int | None = None,
    dry_run: bool = False,
) -> dict:
    """Run the pretraining track end to end; return the manifest (also written to ``out/manifest.json``).

    ``exclude``, ``skip_misrouted``, ``limit`` and ``dry_run``: see :mod:`tokenmill.selection`; a dry run
    returns the plan and writes nothing.
    """
    run: TrackRun = prepare_run(
        "pretrain", inputs, out=out, tokenizer=tokenizer, force=force, unit_bytes=unit_bytes,
        text_mode=text_mode, config={"steps": [repr(s) for s in steps], **(config or {}), "shard_tokens": shard_tokens},
        schemas=schemas, exclude=exclude, skip_misrouted=skip_misrouted, limit=limit,
    )
    _check_eos(run.tokenizer)
    if dry_run:
        return dry_run_plan(run)
    task = PretrainTask(tokenizer=run.tokenizer, schemas=run.schemas, shard_tokens=shard_tokens,
                        text_mode=text_mode, steps=tuple(steps), limit=limit)
    return finish_run(run, task, workers=workers, overwrite=overwrite, progress=progress)


def _check_eos(tokenizer: Any) -> None:
    """Every document ends with EOS: refuse, before any work, a tokenizer that names none."""
    if tokenizer.eos_id is None:
        raise TokenizerError(
            f"tokenizer {tokenizer.name!r} names no end-of-sequence token, which the pretraining track puts after "
            "every document; give the model's tokenizer directory (with its tokenizer_config.json naming "
            "eos_token) instead of a bare tokenizer file"
        )
