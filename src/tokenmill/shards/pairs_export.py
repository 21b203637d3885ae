"""``tokenmill export --to hf`` of a ``tokenmill pref`` output: TRL's tokenized columns, one row per pair.

TRL 1.x's ``DPOTrainer`` takes an already tokenized dataset when its rows hold ``prompt_ids``, ``chosen_ids`` and
``rejected_ids`` (what its ``_prepare_dataset`` writes; its ``DataCollatorForPreference`` reads them), so the
export writes exactly those columns (``int32`` lists), plus the record ``id``. A KTO output writes
``prompt_ids``, ``completion_ids`` and the boolean ``label``. A pair is never cut into windows: ``--seq-len``
is refused.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from tokenmill.errors import ConfigError
from tokenmill.shards.pairs import PreferenceDataset

BATCH_PAIRS = 4096


def is_pref(ds) -> bool:
    return (ds.manifest or {}).get("track") == "pref"


def check_export(to: str, seq_len: int | None) -> None:
    """A pair output exports whole pairs to ``hf`` only."""
    if to != "hf":
        raise ConfigError(f"--to {to}: a `tokenmill pref` output holds pairs, which {to} has no place for; "
                          "export it with --to hf (TRL's prompt_ids, chosen_ids, rejected_ids)")
    if seq_len is not None:
        raise ConfigError("--seq-len: a preference pair is never cut into windows; export without it (pack pairs "
                          "with the pair collators of tokenmill.loader)")


def pair_tables(ds) -> Iterator[tuple[pa.RecordBatch, int]]:
    """(record batch of up to ``BATCH_PAIRS`` rows, tokens in it) over every pair, in order."""
    pairs = PreferenceDataset(ds.directory)
    for start in range(0, len(pairs), BATCH_PAIRS):
        rows = [pairs[i] for i in range(start, min(start + BATCH_PAIRS, len(pairs)))]
        ids = pa.array([pairs.record_id(i) for i in range(start, start + len(rows))], pa.string())
        columns = _kto_columns(rows) if "label" in rows[0] else _pair_columns(rows)
        tokens = sum(len(v) for r in rows for k, v in r.items() if k.endswith("_ids"))
        yield pa.record_batch([*columns.values(), ids], names=[*columns, "id"]), tokens


def _pair_columns(rows: list[dict]) -> dict[str, pa.Array]:
    return {key: _lists([r[key] for r in rows]) for key in ("prompt_ids", "chosen_ids", "rejected_ids")}


def _kto_columns(rows: list[dict]) -> dict[str, pa.Array]:
    return {"prompt_ids": _lists([r["prompt_ids"] for r in rows]),
            "completion_ids": _lists([r["completion_ids"] for r in rows]),
            "label": pa.array([r["label"] for r in rows], pa.bool_())}


def _lists(arrays: list[np.ndarray]) -> pa.Array:
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    flat = np.concatenate(arrays).astype(np.int32) if arrays else np.zeros(0, np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
