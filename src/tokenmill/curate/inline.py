"""Per-document steps applied inside a track's task, one batch at a time, whichever contract they follow.

Two contracts meet here:

* a **document step** (:class:`tokenmill.curate.step.DocStep`): ``score(batch)`` then ``decide(scores)``,
  one reason (or ``None``) per document; a modifier also returns a rewritten ``text`` column;
* a **plain step**: any picklable callable ``step(batch) -> (kept_batch, {reason: n_filtered})``, a plain
  function included.

Either way the caller gets the surviving rows, the number filtered per reason, what the steps counted
beyond that, and the seconds spent per step (by :func:`~tokenmill.curate.step.step_name`). ``setup()`` of
every step is the task's to call, once per worker (:func:`setup_steps`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tokenmill.curate.step import reason, step_name
from tokenmill.errors import ConfigError

ROW = "__tokenmill_row"  # original position of each row, carried through plain steps when asked for


@dataclass
class Applied:
    batch: pa.RecordBatch  # the surviving rows (text rewritten by modifiers)
    rows: np.ndarray | None = None  # their positions in the input batch (when ``keep_rows``)
    filtered: Counter = field(default_factory=Counter)  # reason -> documents removed
    counts: Counter = field(default_factory=Counter)  # what steps counted beyond filtering (pii:email)
    seconds: Counter = field(default_factory=Counter)  # step name -> seconds


def setup_steps(steps: Sequence[Any]) -> None:
    """Call ``setup()`` of every step that has one (load a model once per worker)."""
    for step in steps:
        setup = getattr(step, "setup", None)
        if callable(setup):
            setup()


def is_doc_step(step: Any) -> bool:
    return callable(getattr(step, "score", None)) and callable(getattr(step, "decide", None))


def apply_steps(steps: Sequence[Any], batch: pa.RecordBatch, *, keep_rows: bool = False,
                rewrite: bool = True) -> Applied:
    """Run ``steps`` in order over ``batch``. ``rewrite=False`` refuses steps that rewrite the text."""
    out = Applied(batch, np.arange(batch.num_rows) if keep_rows else None)
    for step in steps:
        started = time.perf_counter()
        if is_doc_step(step):
            _doc_step(step, out, rewrite=rewrite)
        else:
            _plain_step(step, out)
        out.seconds[step_name(step)] += time.perf_counter() - started
    return out


def _doc_step(step: Any, out: Applied, *, rewrite: bool) -> None:
    scored = step.score(out.batch)
    verdict = list(step.decide({k: np.asarray(v) for k, v in scored.scores.items()}))
    keep = np.array([r is None for r in verdict], dtype=bool)
    for r in verdict:
        if r is not None:
            out.filtered[reason(step, r)] += 1  # <step>_v<version>:<rule>, as the cascade counts it
    out.counts.update(scored.counts)
    batch = out.batch
    if scored.text is not None:
        if not rewrite:
            raise ConfigError(f"step {step_name(step)!r} rewrites text; on conversations steps may only "
                              "filter (a rewritten flat text cannot be put back into the messages)")
        batch = batch.set_column(batch.schema.get_field_index("text"), "text", scored.text)
    out.batch = batch.filter(pa.array(keep))
    if out.rows is not None:
        out.rows = out.rows[keep]


def _plain_step(step: Any, out: Applied) -> None:
    batch = out.batch
    if out.rows is not None:
        batch = batch.append_column(ROW, pa.array(out.rows, pa.int64()))
    kept, filtered = step(batch)
    for why, n in filtered.items():
        out.filtered[why] += n
    if out.rows is not None:
        if ROW not in kept.schema.names:
            raise ConfigError(f"step {step_name(step)!r} dropped columns of its batch; a step returns the "
                              "kept rows with every column")
        out.rows = kept.column(ROW).to_numpy()
        kept = kept.drop_columns([ROW])
    out.batch = kept
