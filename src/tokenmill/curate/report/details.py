"""What the funnel shows of a step beyond its counts, read from the step's ledger: dedup cluster sizes and
score histograms.

A step class names what it has through two class attributes:

* ``cluster_size_stat``: the ledger statistic holding, for every document, the size of the group of
  duplicates it belongs to (1 for a unique document): ``exact_dedup.group_size``,
  ``minhash_dedup.cluster_size``. The funnel row gets ``clusters``: per size ``k >= 2``, the number of
  clusters (documents of that size / ``k``: every member of a cluster reached the step, so each is in its
  ledger), their documents, and the ``k - 1`` of each the step removed (one survivor per cluster).
* ``histogram_stats``: ``{statistic: (low, high)}``, statistics shown as a histogram of :data:`BINS`
  equal bins over that range (``quality.score`` over [0, 1]). The funnel row gets ``histogram`` with the
  counts and the step's cut: its ``threshold``, or the corpus-wide cut a ``top_fraction`` run recorded
  in its manifest entry (``cut``).

``id_stats`` names statistics that are identifiers (a cluster's id), which no histogram shows.
Cost: one pass over the step's ledger columns (not its text).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from tokenmill.report.ledger import file_schema, part_exists, read_columns, stage_parts
from tokenmill.steps.build import resolve

BINS = 20


def step_class_of(entry: dict) -> Any:
    try:
        return resolve(entry["name"])
    except (LookupError, ImportError):
        return None


def cluster_sizes(sizes: np.ndarray) -> dict:
    """The cluster table of a ledger's size column (one value per document)."""
    return _cluster_table(size_counts(sizes))


def size_counts(sizes: np.ndarray) -> dict[int, int]:
    """Documents per cluster size ``k >= 2`` of a size column (summable over the ledger's parts)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    values, docs = np.unique(sizes[sizes > 1], return_counts=True)
    return dict(zip(values.tolist(), docs.tolist()))


def _cluster_table(counts: dict[int, int]) -> dict:
    rows = [{"size": int(k), "clusters": int(n // k), "documents": int(n), "removed": int(n - n // k)}
            for k, n in sorted(counts.items())]
    return {"clusters": sum(r["clusters"] for r in rows), "documents": sum(r["documents"] for r in rows),
            "largest": max(counts, default=1), "sizes": rows}


def bin_counts(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """The :data:`BINS` counts of the finite ``values`` over [low, high] (summable over the ledger's parts)."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    counts, _ = np.histogram(np.clip(values, low, high), bins=BINS, range=(low, high))
    return counts.astype(np.int64)


def score_histogram(values: np.ndarray, low: float, high: float, *, cut: float | None) -> dict:
    return _histogram(bin_counts(values, low, high), low, high, cut=cut)


def _histogram(counts: np.ndarray, low: float, high: float, *, cut: float | None) -> dict:
    return {"range": [low, high], "bins": BINS, "counts": counts.astype(int).tolist(), "documents": int(counts.sum()),
            "cut": cut}


def _cut(entry: dict) -> float | None:
    value = entry.get("cut", entry.get("params", {}).get("threshold"))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def step_details(directory: Path, manifest: dict) -> dict[str, dict]:
    """``{step id: {"clusters": ..., "histogram": ...}}`` for the steps of a run that have either.

    Each ledger part is read alone and only for the columns shown, and the counts are summed: memory is one
    part's column, whatever the number of documents."""
    out: dict[str, dict] = {}
    for entry in manifest.get("steps", []):
        cls = step_class_of(entry)
        size_stat = getattr(cls, "cluster_size_stat", None)
        hists = dict(getattr(cls, "histogram_stats", None) or {})
        if not size_stat and not hists:
            continue
        parts = [Path(directory) / f for f in stage_parts(manifest).get(entry["stage"], [])]
        parts = [p for p in parts if part_exists(p)]
        if not parts:
            continue
        schemas = {p: file_schema(p) for p in parts}  # each part's footer read once, for every column below
        names = set().union(*(schema.names for schema in schemas.values()))
        detail: dict[str, Any] = {}
        col = f"{entry['name']}.{size_stat}"
        if size_stat and col in names:
            counts: Counter = Counter()
            for values in _columns(schemas, col):
                counts.update(size_counts(values))
            detail["clusters"] = {"column": col, **_cluster_table(dict(counts))}
        for stat, (low, high) in hists.items():
            col = f"{entry['name']}.{stat}"
            if col in names:
                bins = sum((bin_counts(v, low, high) for v in _columns(schemas, col)), np.zeros(BINS, np.int64))
                detail["histogram"] = {"column": col, **_histogram(bins, low, high, cut=_cut(entry))}
        if detail:
            out[entry["id"]] = detail
    return out


def _columns(schemas: dict[Path, Any], column: str):
    """Column ``column`` of each part (``{path: its schema}``) that has it, as numpy (nulls as NaN), one part
    at a time (a part where it is null in every row counts nothing, in a histogram or a cluster table)."""
    import pyarrow as pa

    for p, schema in schemas.items():
        if column in schema.names and not pa.types.is_null(schema.field(column).type):
            yield read_columns(p, [column]).column(column).to_numpy(zero_copy_only=False)


def attach(funnel: dict, directory: Path, manifest: dict) -> dict:
    """The funnel with each step's details added to its row."""
    details = step_details(directory, manifest)
    for row in funnel["rows"]:
        row.update(details.get(row["step"], {}))
    return funnel


def render_details(row: dict) -> list[str]:
    """The lines the printed funnel shows under a step's row."""
    lines = []
    c = row.get("clusters")
    if c and not c["clusters"]:
        lines.append("      clusters: no duplicates")
    elif c:
        sizes = ", ".join(f"{r['clusters']:,}x{r['size']}" for r in c["sizes"][:8])
        more = f", ... (largest {c['largest']:,})" if len(c["sizes"]) > 8 else ""
        lines.append(f"      clusters: {c['clusters']:,} of {c['documents']:,} documents" +
                     (f" (count x size: {sizes}{more})" if sizes else ""))
    h = row.get("histogram")
    if h:
        cut = f", cut {h['cut']:.4g}" if h.get("cut") is not None else ""
        lines.append(f"      {h['column']} in {h['bins']} bins over {h['range'][0]:g}-{h['range'][1]:g}{cut}: "
                     + " ".join(str(n) for n in h["counts"]))
    return lines
