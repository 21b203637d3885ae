"""Raw batches -> canonical ``Document`` batches (see ``tokenmill.records.DOCUMENT``).

The router decides once, per file, which fields hold the text, id, url and license (its ``schema``);
this step only applies that decision. A record without usable text is rejected, never dropped:
``missing_field`` (no text field or null), ``wrong_type`` (text is not a string), ``empty_document``
(nothing but whitespace).
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.io.base import RawBatch
from tokenmill.records import DOCUMENT, record_id
from tokenmill.report.accounting import Reject


def _dig(row: dict, path: str | None) -> Any:
    """``row["a"]["b"]`` for the dotted path ``"a.b"``; None when any part is missing."""
    if not path:
        return None
    value: Any = row
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _meta(row: dict, keys: list[str]) -> str | None:
    picked = {k: row[k] for k in keys if k in row}
    return orjson.dumps(picked, default=str).decode() if picked else None


def _text_problem(text: Any, field: str) -> tuple[str, str] | None:
    if text is None:
        return "missing_field", f"no text in field {field!r}"
    if not isinstance(text, str):
        return "wrong_type", f"field {field!r} is {type(text).__name__}, expected a string"
    if not text.strip():
        return "empty_document", f"field {field!r} is empty or whitespace"
    return None


def to_documents(raw: RawBatch, schema: dict) -> tuple[pa.RecordBatch, list[Reject]]:
    """Map one raw batch onto ``DOCUMENT``; return the documents and the records rejected on the way."""
    rows = raw.rows if raw.rows is not None else _columnar_rows(raw, schema)
    field = schema.get("text") or "text"
    meta_keys = list(schema.get("meta") or [])
    cols: dict[str, list] = {name: [] for name in DOCUMENT.names}
    rejects: list[Reject] = []
    for row, loc in zip(rows, raw.locs):
        text = _dig(row, field)
        problem = _text_problem(text, field)
        if problem:
            rejects.append(Reject(raw.source, loc, problem[0], f"{raw.source}:{loc}: {problem[1]}", raw=row))
            continue
        cols["id"].append(record_id(_dig(row, schema.get("id")), raw.source, loc))
        cols["text"].append(text)
        cols["source"].append(raw.source)
        cols["url"].append(_str_or_none(_dig(row, schema.get("url"))))
        cols["license"].append(_str_or_none(_dig(row, schema.get("license"))))
        cols["meta"].append(_meta(row, meta_keys))
    return pa.RecordBatch.from_pydict(cols, schema=DOCUMENT), rejects


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _columnar_rows(raw: RawBatch, schema: dict) -> list[dict]:
    """Rows of the columns the schema uses (only those are converted to Python objects)."""
    table = raw.table
    if table is None:
        return []
    wanted = {schema.get(k) for k in ("text", "id", "url", "license")} | set(schema.get("meta") or [])
    roots = {w.split(".")[0] for w in wanted if w}
    keep = [name for name in table.schema.names if name in roots]
    return table.select(keep).to_pylist() if keep else [{} for _ in range(table.num_rows)]


def text_lengths(batch: pa.RecordBatch) -> pa.Array:
    """UTF-8 byte length of every document's text (for accounting)."""
    return pc.binary_length(batch.column("text"))
