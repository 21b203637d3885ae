"""Read one field of every document's ``meta`` JSON, for steps that decide from what came with the text.

WARC input keeps ``http_headers``, ``html_head``, ``html_links`` and ``date`` there (see
:mod:`tokenmill.io.warc`); other inputs keep their extra columns there. A missing ``meta`` column, a null
or malformed ``meta`` string, or a missing key all give ``None``: a step never fails on them.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa


def meta_values(batch: pa.RecordBatch, *keys: str) -> list[dict[str, Any]]:
    """For every row, ``{key: value or None}`` for each of ``keys``."""
    names = batch.schema.names
    raw = batch.column("meta").to_pylist() if "meta" in names else [None] * batch.num_rows
    out = []
    for value in raw:
        parsed = _parse(value)
        out.append({k: parsed.get(k) for k in keys})
    return out


def _parse(value: Any) -> dict:
    if not value:
        return {}
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def strings(batch: pa.RecordBatch, name: str) -> list[str | None]:
    """A string column as Python values, or all ``None`` when the batch has no such column."""
    if name not in batch.schema.names:
        return [None] * batch.num_rows
    return [None if v is None else str(v) for v in batch.column(name).to_pylist()]
