"""Apply a list of document steps to a ``Document`` batch: score, decide, record, rewrite.

For each step in order: ``score`` the documents, write every statistic into the ledger as
``<step>.<stat>``, ``decide`` from those statistics alone, and give each document the first rule that
removes it as its ``reason`` (``<step>_v<version>:<rule>``). A modifier's rewritten text is what the
later steps see and what the kept documents carry.

**Removed documents are still scored** (``score_removed=True``, the default): every step scores every
document, whatever an earlier step decided. The ledger then holds every statistic of every document, so
``tokenmill funnel --set`` can loosen *or* tighten any threshold and give exactly the counts of a full
rerun. The cost is scoring documents that are already gone (a language filter that removes half the
input doubles the work of the heuristics after it). With ``score_removed=False`` a step scores only the
documents that reached it; the funnel can then still tighten thresholds exactly, and says how many
documents lack the scores a loosened threshold would need.

The documents a step receives are a ``Document`` batch whose ``text`` is the text after the earlier
modifiers. Scores pass to ``decide`` as numpy arrays converted from Arrow the same way the funnel
converts ledger columns (floats, ints, bools, strings as object arrays), so both see the same values.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import ConfigError
from tokenmill.steps.contract import DocStep, column, reason, step_id

LEDGER_KEYS = ("id", "source", "loc")


@dataclass
class CascadeResult:
    kept: pa.RecordBatch  # the documents no step removed, text as rewritten by the modifiers
    ledger: pa.RecordBatch  # id, source, loc, url (when the documents have one), <step>.<stat>..., kept, reason
    filtered: Counter  # reason -> documents it removed (first removing rule only)
    counts: Counter  # what modifiers did (Scored.counts, over every document they scored)
    seconds: Counter = field(default_factory=Counter)  # step id -> seconds


def as_numpy(values: Any) -> np.ndarray:
    """A score column as ``decide`` sees it, whether it came from a step or from the ledger."""
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.string())
    return arr.to_numpy(zero_copy_only=False)


def _arrow(values: Any, n: int, where: str) -> pa.Array:
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if len(arr) != n:
        raise ValueError(f"{where}: {len(arr)} values for {n} documents")
    return arr


def _scatter(values: pa.Array, positions: np.ndarray | None, n: int) -> pa.Array:
    """``values`` (one per scored row) placed at ``positions`` of an ``n``-row column, null elsewhere."""
    if positions is None:
        return values
    idx = np.full(n, len(values), dtype=np.int64)
    idx[positions] = np.arange(len(values))
    return pc.take(pa.concat_arrays([values, pa.nulls(1, values.type)]), pa.array(idx))


def _replace_text(docs: pa.RecordBatch, text: pa.Array, positions: np.ndarray | None) -> pa.RecordBatch:
    text = text.cast(pa.large_string())
    if positions is not None:
        old = docs.column("text")
        idx = np.arange(docs.num_rows, dtype=np.int64) + len(text)
        idx[positions] = np.arange(len(text))
        text = pc.take(pa.concat_arrays([text, old]), pa.array(idx))
    i = docs.schema.get_field_index("text")
    return docs.set_column(i, docs.schema.field(i), pc.fill_null(text, ""))


def decisions(step: DocStep, scores: Mapping[str, Any], n: int) -> np.ndarray:
    """``step.decide`` over numpy copies of ``scores``: an object array of rules (``None`` = keep)."""
    out = step.decide({k: as_numpy(v) for k, v in scores.items()})
    out = np.asarray(out, dtype=object)
    if out.shape != (n,):
        raise ValueError(f"{step_id(step)}.decide returned {out.shape} decisions for {n} documents")
    return out


@dataclass(frozen=True)
class Cascade:
    """Document steps applied in order to ``Document`` batches. Picklable; ``setup()`` once per worker."""

    steps: Sequence[Any] = ()
    score_removed: bool = True
    rewrite: bool = True  # False: a step that rewrites the text is refused (conversations: sft/steps.py)

    def setup(self) -> None:
        for step in self.steps:
            setup = getattr(step, "setup", None)
            if callable(setup):
                setup()

    def __call__(self, docs: pa.RecordBatch, locs: Sequence[int] | np.ndarray) -> CascadeResult:
        n = docs.num_rows
        reasons = np.full(n, None, dtype=object)
        columns: dict[str, pa.Array] = {}
        filtered, counts, seconds = Counter(), Counter(), Counter()
        for step in self.steps:
            started = time.perf_counter()
            positions = None if self.score_removed else np.flatnonzero(reasons == None)
            batch = docs if positions is None else docs.take(pa.array(positions))
            scored = step.score(batch)
            m = batch.num_rows
            for stat, values in scored.scores.items():
                arr = _arrow(values, m, f"{step_id(step)} statistic {stat!r}")
                columns[column(step, stat)] = _scatter(arr, positions, n)
            if scored.text is not None and not self.rewrite:
                raise ConfigError(f"step {step_id(step)!r} rewrites text; on conversations steps may only filter "
                                  "(a rewritten flat text cannot be put back into the messages)")
            if scored.text is not None:
                docs = _replace_text(docs, _arrow(scored.text, m, f"{step_id(step)} text"), positions)
            rules = decisions(step, scored.scores, m)
            rows = np.arange(n) if positions is None else positions
            fresh = np.array([r is not None for r in rules], dtype=bool) & (reasons[rows] == None)
            for i, rule in zip(rows[fresh], rules[fresh]):
                reasons[i] = reason(step, str(rule))
            filtered.update(reasons[rows[fresh]].tolist())
            counts.update(scored.counts)
            seconds[step_id(step)] += time.perf_counter() - started  # pyright: ignore[reportArgumentType] (typeshed's Counter counts ints; seconds add as floats)
        keep = reasons == None
        ledger = ledger_batch(docs, locs, columns, keep, reasons)
        kept = docs if keep.all() else docs.filter(pa.array(keep))  # nothing removed: no copy of the batch
        return CascadeResult(kept, ledger, filtered, counts, seconds)


def ledger_batch(docs: pa.RecordBatch, locs: Sequence[int] | np.ndarray, columns: dict[str, pa.Array],
                 keep: np.ndarray, reasons: np.ndarray) -> pa.RecordBatch:
    arrays = [docs.column("id"), docs.column("source"), pa.array(np.asarray(locs, dtype=np.int64))]
    names: list[str] = list(LEDGER_KEYS)
    if "url" in docs.schema.names:  # a decision traced to its page (WARC and any input with a URL field)
        names.append("url")
        arrays.append(docs.column("url").cast(pa.string()))
    for name, arr in columns.items():
        names.append(name)
        arrays.append(arr.cast(pa.string()) if pa.types.is_large_string(arr.type) else arr)
    arrays += [pa.array(keep, pa.bool_()), pa.array(reasons.tolist(), pa.string())]
    return pa.RecordBatch.from_arrays(arrays, names=names + ["kept", "reason"])
