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

from pathlib import Path
from typing import Any

import numpy as np

BINS = 20


def step_class_of(entry: dict) -> Any:
    from tokenmill.curate.build import resolve

    try:
        return resolve(entry["name"])
    except (LookupError, ImportError):
        return None


def cluster_sizes(sizes: np.ndarray) -> dict:
    """The cluster table of a ledger's size column (one value per document)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    values, docs = np.unique(sizes[sizes > 1], return_counts=True)
    rows = [{"size": int(k), "clusters": int(n // k), "documents": int(n), "removed": int(n - n // k)}
            for k, n in zip(values.tolist(), docs.tolist())]
    return {"clusters": sum(r["clusters"] for r in rows), "documents": sum(r["documents"] for r in rows),
            "largest": int(values.max()) if len(values) else 1, "sizes": rows}


def score_histogram(values: np.ndarray, low: float, high: float, *, cut: float | None) -> dict:
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    counts, _ = np.histogram(np.clip(values, low, high), bins=BINS, range=(low, high))
    return {"range": [low, high], "bins": BINS, "counts": counts.astype(int).tolist(), "documents": int(len(values)),
            "cut": cut}


def _cut(entry: dict) -> float | None:
    value = entry.get("cut", entry.get("params", {}).get("threshold"))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def step_details(directory: Path, manifest: dict) -> dict[str, dict]:
    """``{step id: {"clusters": ..., "histogram": ...}}`` for the steps of a run that have either."""
    from tokenmill.report.ledger import read_stage_parts, stage_parts

    out: dict[str, dict] = {}
    for entry in manifest.get("steps", []):
        cls = step_class_of(entry)
        size_stat = getattr(cls, "cluster_size_stat", None)
        hists = dict(getattr(cls, "histogram_stats", None) or {})
        if not size_stat and not hists:
            continue
        table = read_stage_parts(Path(directory), stage_parts(manifest).get(entry["stage"], []))
        if table is None:
            continue
        detail: dict[str, Any] = {}
        col = f"{entry['name']}.{size_stat}"
        if size_stat and col in table.column_names:
            detail["clusters"] = {"column": col, **cluster_sizes(table.column(col).to_numpy())}
        for stat, (low, high) in hists.items():
            col = f"{entry['name']}.{stat}"
            if col in table.column_names:
                values = table.column(col).to_numpy(zero_copy_only=False)
                detail["histogram"] = {"column": col, **score_histogram(values, low, high, cut=_cut(entry))}
        if detail:
            out[entry["id"]] = detail
    return out


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
