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

from tokenmill.base.accounting import Reject
from tokenmill.io.base import RawBatch
from tokenmill.records import DOCUMENT, record_id


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
    if raw.table is not None and _plain_columns(raw.table, schema):
        return _columnar_documents(raw, raw.table, schema)
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
        cols["source"].append(_str_or_none(_dig(row, schema.get("source"))) or raw.source)
        cols["url"].append(_str_or_none(_dig(row, schema.get("url"))))
        cols["license"].append(_str_or_none(_dig(row, schema.get("license"))))
        cols["meta"].append(_str_or_none(_dig(row, schema["meta_json"])) if schema.get("meta_json")
                            else _meta(row, meta_keys))
    return pa.RecordBatch.from_pydict(cols, schema=DOCUMENT), rejects


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _columnar_rows(raw: RawBatch, schema: dict) -> list[dict]:
    """Rows of the columns the schema uses (only those are converted to Python objects)."""
    table = raw.table
    if table is None:
        return []
    wanted = {schema.get(k) for k in ("text", "id", "url", "license", "source", "meta_json")} | set(schema.get("meta") or [])
    roots = {w.split(".")[0] for w in wanted if w}
    keep = [name for name in table.schema.names if name in roots]
    return table.select(keep).to_pylist() if keep else [{} for _ in range(table.num_rows)]


def text_lengths(batch: pa.RecordBatch) -> pa.Array:
    """UTF-8 byte length of every document's text (for accounting)."""
    return pc.binary_length(batch.column("text"))


def _plain_columns(table: pa.RecordBatch, schema: dict) -> bool:
    """Whether the fast path applies: the text column holds strings and id/url/license name top-level
    string or integer columns (or nothing). Metadata columns of any type are fine: only they become Python
    values, for the ``meta`` JSON, never the text."""
    names = table.schema.names
    field = schema.get("text") or "text"
    if field not in names or not _is_string(table.schema.field(field).type):
        return False
    for key in ("id", "url", "license", "source", "meta_json"):
        name = schema.get(key)
        if name is None or (name not in names and "." not in name):
            continue  # absent: null in both paths
        if name not in names or not _castable(table.schema.field(name).type):
            return False
    return True


def _is_string(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _castable(kind: pa.DataType) -> bool:
    """Types whose Arrow string cast equals Python's ``str`` of the value."""
    return _is_string(kind) or pa.types.is_integer(kind) or pa.types.is_null(kind)


def _meta_strings(table: pa.RecordBatch, keys: list[str], keep: pa.Array, n: int) -> pa.Array:
    """The ``meta`` JSON of the kept rows, from the metadata columns only (what ``_meta`` gives per row)."""
    present = [k for k in dict.fromkeys(keys) if k in table.schema.names]
    if not present:
        return pa.nulls(n, pa.string())
    rows = table.select(present).filter(keep).to_pylist()
    return pa.array([orjson.dumps(r, default=str).decode() for r in rows], pa.string())


def _column_strings(table: pa.RecordBatch, name: str | None, keep: pa.Array) -> pa.Array:
    if not name or name not in table.schema.names:
        return pa.nulls(pc.sum(keep).as_py() or 0, pa.string())
    column = table.column(name).filter(keep)
    try:
        return pc.cast(column, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # nested values, or bytes that are not UTF-8: their JSON text (a URL step then calls it invalid)
        return pa.array([_str_or_none(v if not isinstance(v, bytes) else v.decode("utf-8", "replace"))
                         if not isinstance(v, (dict, list)) else orjson.dumps(v, default=str).decode()
                         for v in column.to_pylist()], pa.string())


def _columnar_documents(raw: RawBatch, table: pa.Table, schema: dict) -> tuple[pa.RecordBatch, list[Reject]]:
    """``to_documents`` for Arrow input (``table``: ``raw``'s): whole columns at a time, Python only for the
    rejected rows."""
    field = schema.get("text") or "text"
    text = table.column(field)
    empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(text)), 0)
    bad = pc.fill_null(pc.or_kleene(text.is_null(), empty), True)
    rejects = []
    for i in pc.indices_nonzero(bad).to_pylist():
        value = text[i].as_py()
        reason, detail = _text_problem(value, field) or ("empty_document", f"field {field!r} is empty")
        loc = raw.locs[i]
        rejects.append(Reject(raw.source, loc, reason, f"{raw.source}:{loc}: {detail}", raw=table.slice(i, 1).to_pylist()[0]))
    keep = pc.invert(bad)
    locs = [loc for loc, b in zip(raw.locs, bad.to_pylist()) if not b]
    own = _column_strings(table, schema.get("id"), keep).to_pylist()
    ids = [record_id(o, raw.source, loc) for o, loc in zip(own, locs)]
    n = len(ids)
    source = pa.array([raw.source] * n, pa.string())
    if schema.get("source"):  # the origin a tokenmill documents file carries, else this file
        source = pc.coalesce(_column_strings(table, schema["source"], keep), source)
    meta = (_column_strings(table, schema["meta_json"], keep) if schema.get("meta_json")
            else _meta_strings(table, list(schema.get("meta") or []), keep, n))
    columns = [pa.array(ids, pa.string()), pc.cast(text.filter(keep), pa.large_string()), source,
               _column_strings(table, schema.get("url"), keep), _column_strings(table, schema.get("license"), keep),
               meta]
    return pa.RecordBatch.from_arrays(columns, schema=DOCUMENT), rejects
