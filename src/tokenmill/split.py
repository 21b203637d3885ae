"""The validation split of both tracks: which kept records go to ``OUT/val/`` instead of the training shards.

**By record, by content.** Every kept record (a pretraining document, an SFT conversation) gets a 64-bit
key: ``blake2b`` of its content (8-byte digest, read little-endian) keyed by the seed (``--val-seed``,
default 0; the blake2b key is ``tokenmill-val:text:<seed>`` for documents, ``tokenmill-val:conversation:<seed>``
for conversations): the UTF-8 text of a
document as it is tokenized (after any curation step that rewrites it), the canonical conversation
(messages and tools as normalised, whatever the dataset's style) of an example. A record is never split,
and the key depends on nothing else: not on the number of workers, the unit size, the engine, the order
of the inputs, their names or a resume, so the same record lands on the same side in every run with the
same seed (with a count split, given the same kept records). Exact duplicates share a key and so land on
the same side (no copy of a validation document trains; with a count split, unless the copies sit exactly
at the cut). A second key, of the record's source and id, only breaks ties between equal contents.

* ``--val-fraction F``: a record is validation when its key is below ``F * 2**64``; each record is
  decided on its own, in the one pass that writes the shards. The share is ``F`` up to sampling noise
  (binomial: about ``sqrt(F(1-F)/n)`` for ``n`` kept records).
* ``--val-count N``: exactly the ``N`` kept records with the smallest (key, tie) pairs. That needs the
  whole corpus, so the run is two stages: ``val_rank`` runs the track's work per unit without writing
  shards and keeps the unit's ``N`` smallest pairs (``_work/val_rank/<unit>.npy``, 16 bytes each); the
  ``shards`` stage then writes with the ``N``-th smallest pair as its cut. The input is read (and SFT
  conversations rendered) twice; the ranking's memory is ``N`` pairs per unit. Both stages have their
  own completion markers, so a run killed in either resumes there with the same bytes. Only when two
  kept records are equal in content, source and id (the same line duplicated under its own id) can the
  count exceed ``N``: such copies are never separated.

Both ways pick the records with the smallest keys, so with the same seed a ``--val-count`` set and a
``--val-fraction`` set are prefixes of one order, and a larger ``N`` or ``F`` only adds records.
Content keys, unlike "source file and record index" keys, survive renamed, reordered or re-sharded
inputs; records whose text changes (another curation step rewrites it) may change side.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.engine.outputs import Shards, as_data
from tokenmill.engine.stage import UnitResult
from tokenmill.errors import ConfigError

if TYPE_CHECKING:
    from tokenmill.engine.stage import Unit
    from tokenmill.pref.run import PrefTask
    from tokenmill.pretrain.run import PretrainTask
    from tokenmill.sft.run import SftTask

TrackTask: TypeAlias = "PretrainTask | SftTask | PrefTask"  # a token track's task over one input unit (it carries its split)

VAL_DIR = "val"  # where the validation shards go, inside the run's output directory
RANK_STAGE = "val_rank"
_SPACE = float(1 << 64)


@dataclass(frozen=True)
class ValSplit:
    """How a run splits off validation records; ``cut`` is set by the ranking stage of a count split."""

    fraction: float | None = None
    count: int | None = None
    seed: int = 0
    ranking: bool = False  # the first pass of a count split: collect keys, write nothing
    cut: tuple[int, int] | None = None  # count split: the N-th smallest (key, tie) pair

    def describe(self) -> dict:
        """What enters the run's configuration and fingerprint."""
        return {"val_fraction": self.fraction, "val_count": self.count, "val_seed": self.seed,
                "key": "blake2b-64 of the content, seeded"}

    def is_val(self, keys: np.ndarray, ties: np.ndarray) -> np.ndarray:
        """Which of the records with these keys go to validation (bool array)."""
        if self.fraction is not None:
            return keys < np.uint64(int(self.fraction * _SPACE))
        if self.cut is None:
            raise ConfigError("a --val-count split needs its cut from the val_rank stage before writing shards")
        key, tie = (np.uint64(v) for v in self.cut)
        return (keys < key) | ((keys == key) & (ties <= tie))


def make_split(*, val_fraction: float | None = None, val_count: int | None = None, val_seed: int = 0) -> ValSplit | None:
    """The run's split from its options (None: no split); ConfigError names every bad value."""
    problems = []
    if val_fraction is not None and val_count is not None:
        problems.append("give either val_fraction (--val-fraction) or val_count (--val-count), not both")
    if val_fraction is not None and (isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float))
                                     or not 0 < val_fraction < 1):
        problems.append(f"val_fraction must be a number between 0 and 1 (exclusive), got {val_fraction!r}")
    if val_count is not None and (isinstance(val_count, bool) or not isinstance(val_count, int) or val_count <= 0):
        problems.append(f"val_count must be a positive integer, got {val_count!r}")
    if isinstance(val_seed, bool) or not isinstance(val_seed, int) or val_seed < 0:
        problems.append(f"val_seed must be a non-negative integer, got {val_seed!r}")
    if problems:
        raise ConfigError(problems)
    if val_fraction is None and val_count is None:
        return None
    return ValSplit(fraction=None if val_fraction is None else float(val_fraction), count=val_count, seed=val_seed)


def _hasher_key(seed: int, what: bytes) -> bytes:
    return b"tokenmill-val:" + what + b":" + str(seed).encode()


def _digest(data: Any, key: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, key=key).digest(), "little")


def text_keys(texts: pa.Array | pa.ChunkedArray, seed: int) -> np.ndarray:
    """The content key of every text (uint64), hashed straight from the Arrow buffers (no Python strings)."""
    array = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = array.cast(pa.large_string())
    n, buffers = len(array), array.buffers()
    width = np.int64 if pa.types.is_large_string(array.type) else np.int32
    bounds = np.frombuffer(buffers[1], dtype=width)[array.offset:array.offset + n + 1].tolist() if n else []
    data = memoryview(buffers[2]) if buffers[2] is not None else memoryview(b"")
    key = _hasher_key(seed, b"text")
    return np.fromiter((_digest(data[a:b], key) for a, b in zip(bounds, bounds[1:])), dtype=np.uint64, count=n)


def identity_keys(sources: list[str], ids: list[str], seed: int) -> np.ndarray:
    """The tie-break key of every record: its source and id (uint64)."""
    key = _hasher_key(seed, b"tie")
    return np.fromiter((_digest(f"{s}\0{i}".encode("utf-8", "surrogateescape"), key) for s, i in zip(sources, ids)),
                       dtype=np.uint64, count=len(ids))


def conversation_key(conv: dict, seed: int) -> int:
    """The content key of one canonical conversation: its messages and tools, whatever its source style."""
    content = orjson.dumps({"messages": conv["messages"], "tools": conv.get("tools")},
                           option=orjson.OPT_SORT_KEYS, default=str)
    return _digest(content, _hasher_key(seed, b"conversation"))


def smallest(pairs: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` smallest (key, tie) rows of an (m, 2) uint64 array, in order."""
    if len(pairs) == 0:
        return np.zeros((0, 2), np.uint64)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    return pairs[order[:n]]


def pairs_of(keys: list[np.ndarray], ties: list[np.ndarray]) -> np.ndarray:
    """Key and tie arrays collected batch by batch, as one (m, 2) uint64 array."""
    if not keys:
        return np.zeros((0, 2), np.uint64)
    return np.stack([np.concatenate(keys), np.concatenate(ties)], axis=1).astype(np.uint64, copy=False)


def rank_file(unit_name: str) -> Path:
    """Where the ranking stage keeps a unit's smallest pairs, relative to the output directory."""
    return Path("_work") / RANK_STAGE / f"{unit_name}.npy"


@dataclass(frozen=True)
class RankTask:
    """The ranking stage's task: the track's task with a ranking split, run in a scratch directory (so no
    shard, reject or ledger file is committed); only the unit's ``count`` smallest pairs are kept."""

    task: TrackTask  # its split has ranking=True; its result data holds "val_pairs"
    count: int

    def setup(self) -> None:
        setup = getattr(self.task, "setup", None)
        if callable(setup):
            setup()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        scratch = Path(tempfile.mkdtemp(prefix=f"{unit.name}-rank-", dir=staging.parent))
        try:
            inner = self.task(unit, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        kept = smallest(inner.data["val_pairs"], self.count)
        path = staging / rank_file(unit.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, kept)
        return UnitResult(stats=inner.stats, outputs=[str(rank_file(unit.name))],
                          data={"pairs": str(rank_file(unit.name)), "n": int(len(kept))},
                          step_seconds=inner.step_seconds)


class SplitWriters:
    """One unit's shard writers: the training shards in the unit's staging directory, the validation shards
    under ``val/`` of it. In the ranking pass of a count split nothing is written: only the pairs are kept."""

    def __init__(self, split: ValSplit | None, staging: Path, make: Callable[[Path], Any]):
        self.split = split
        self.ranking = split is not None and split.ranking
        self.train = make(staging)
        self.val = make(staging / VAL_DIR) if split is not None and not self.ranking else None
        self.val_docs = self.val_tokens = 0
        self._keys: list[np.ndarray] = []
        self._ties: list[np.ndarray] = []

    def _document_keys(self, docs: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        if self.split is None:
            raise ConfigError("documents are keyed for a validation split only: this run has none")
        seed = self.split.seed
        return (text_keys(docs.column("text"), seed),
                identity_keys(docs.column("source").to_pylist(), docs.column("id").to_pylist(), seed))

    def rank(self, docs: pa.RecordBatch) -> None:
        """Keep the pairs of a batch of kept documents (ranking pass)."""
        keys, ties = self._document_keys(docs)
        self._keys.append(keys)
        self._ties.append(ties)

    def route(self, docs: pa.RecordBatch) -> list[tuple[Any, pa.RecordBatch]]:
        """(writer, documents) for the non-empty parts of a batch of kept documents."""
        if self.val is None or self.split is None:  # a val writer exists only with a split
            return [(self.train, docs)]
        val = pa.array(self.split.is_val(*self._document_keys(docs)))
        parts = ((self.train, docs.filter(pc.invert(val))), (self.val, docs.filter(val)))
        return [(w, b) for w, b in parts if b.num_rows]

    def pick(self, conv: dict, rec_id: str, source: str) -> Any:
        """The writer of one kept conversation (None in the ranking pass, which only keeps its pair)."""
        if self.split is None:
            return self.train
        key = np.array([conversation_key(conv, self.split.seed)], np.uint64)
        tie = identity_keys([source], [rec_id], self.split.seed)
        if self.ranking:
            self._keys.append(key)
            self._ties.append(tie)
            return None
        return self.val if self.split.is_val(key, tie)[0] else self.train

    def count(self, writer: Any, documents: int, tokens: int) -> None:
        if writer is self.val:
            self.val_docs += documents
            self.val_tokens += tokens

    def close(self) -> dict:
        """The unit result's data: the shards written (and the validation ones), or the ranking pairs."""
        shards = self.train.close()
        if self.ranking:
            return as_data(Shards(shards), val_pairs=pairs_of(self._keys, self._ties))
        if self.val is None:
            return as_data(Shards(shards))
        return as_data(Shards(shards),
                       val={"shards": self.val.close(), "documents": self.val_docs, "tokens": self.val_tokens})


def find_cut(out: Path, results: list[Any], count: int) -> tuple[int, int]:
    """The ``count``-th smallest pair over every unit's ranking file; ConfigError when too few records are kept."""
    kept = sum(r.stats.kept for r in results)
    if kept <= count:
        raise ConfigError(f"val_count={count} (--val-count): the run keeps only {kept:,} records, so nothing would be "
                          f"left to train on; ask for fewer than {kept:,} (with --overwrite: this run's ranking "
                          "is kept under its settings) or use --val-fraction")
    pairs = [np.load(out / r.data["pairs"]) for r in results if r.data.get("n")]
    top = smallest(np.concatenate(pairs), count)
    return int(top[-1, 0]), int(top[-1, 1])


def split_counts(results: list[Any]) -> dict:
    """Validation documents, tokens and shard stems summed over the shards stage's unit results."""
    val = [r.data.get("val") or {} for r in results]
    return {"documents": sum(v.get("documents", 0) for v in val), "tokens": sum(v.get("tokens", 0) for v in val),
            "shards": [s for v in val for s in v.get("shards", [])]}
