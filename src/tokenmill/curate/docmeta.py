"""Read one field of every document's ``meta`` JSON, for steps that decide from what came with the text.

WARC input keeps ``http_headers``, ``html_head``, ``html_links`` and ``date`` there (see
:mod:`tokenmill.io.warc`); other inputs keep their extra columns there. A missing ``meta`` column, a null
or malformed ``meta`` string, or a missing key all give ``None``: a step never fails on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import pyarrow as pa

from tokenmill.errors import InputError

BAD_URL_SHARE = 0.05  # above this share of a batch's URLs naming no host, a URL-based step fails


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


def check_urls(step: str, urls: Sequence[str | None], usable: Sequence[bool]) -> None:
    """Fail when more than :data:`BAD_URL_SHARE` of the URLs given in one batch (and at least two) name no
    host: the input's URLs are in a form the step cannot read (or the wrong field was mapped as ``url``),
    and a consent step that judged none of them would keep every document with nothing said. A missing URL
    is not a bad one: a source without URLs (books, code) is judged ``no_url`` and counted, never failed."""
    given = [u for u in urls if (u or "").strip()]
    bad = [u for u, ok in zip(urls, usable) if (u or "").strip() and not ok]
    if len(bad) >= 2 and len(bad) > BAD_URL_SHARE * len(given):
        raise InputError(f"{step}: {len(bad):,} of {len(given):,} URLs in a batch name no host (e.g. {bad[0]!r}), so "
                         f"the step cannot judge their pages; map the field that holds the page's URL as url "
                         f"(schema: {{url: ...}}), or drop the {step} step for this input")
