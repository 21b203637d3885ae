"""``report.html``: one self-contained page (inline SVG and CSS, no script, no external asset) per run.

Sections: the funnel (a bar per step: what reached it, the part it removed), removals per rule, the
corpus steps' details from the funnel rows (:mod:`tokenmill.curate.report.details`: a table and a bar chart of
dedup cluster sizes, the quality score histogram with its threshold or corpus-wide cut), a histogram of
every numeric ledger statistic with its step's threshold marked (identifiers such as cluster ids left
out), and a few removed documents per reason (truncated, HTML-escaped). Thresholds come from a step's ``thresholds`` mapping
(``{stat: parameter}``) when it has one, else from parameters named ``min_<stat>`` / ``max_<stat>``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokenmill.base.files import atomic_write
from tokenmill.curate.report.details import step_class_of
from tokenmill.report.ledger import stage_parts, stage_schema, stage_values
from tokenmill.steps.build import resolve

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right}th{background:#f4f4f4}
td.l,th.l{text-align:left}svg text{font:12px system-ui,sans-serif}.hists{display:flex;flex-wrap:wrap;gap:12px}
figure{margin:0;border:1px solid #eee;padding:6px;width:262px}figcaption{font-size:12px;color:#555}
pre{white-space:pre-wrap;background:#f8f8f8;border-left:3px solid #c33;padding:6px;max-height:14em;overflow:auto}
.muted{color:#777}
"""
W = 1000
BAR = 480


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def funnel_svg(funnel: dict) -> str:
    rows = funnel["rows"]
    total = max(funnel["input"], 1)
    h = 26 * (len(rows) + 1) + 10
    parts = [f'<svg class="chart funnel" width="{W}" height="{h}" role="img" aria-label="funnel">']
    for i, r in enumerate(rows):
        y = 5 + 26 * i
        kept_w = BAR * r["left"] / total
        gone_w = BAR * r["removed"] / total
        parts.append(f'<text x="0" y="{y + 15}">{_e(r["step"])}</text>'
                     f'<rect class="left" x="220" y="{y}" width="{kept_w:.1f}" height="20" fill="#4a7"/>'
                     f'<rect class="removed" x="{220 + kept_w:.1f}" y="{y}" width="{gone_w:.1f}" height="20" fill="#d55"/>'
                     f'<text x="{230 + BAR}" y="{y + 15}">-{r["removed"]:,} '
                     f'({r["share_of_input"]:.1%} / {r["share_of_reached"]:.1%})</text>')
    y = 5 + 26 * len(rows)
    parts.append(f'<text x="0" y="{y + 15}">kept</text><rect class="left" x="220" y="{y}" '
                 f'width="{BAR * funnel["kept"] / total:.1f}" height="20" fill="#4a7"/>'
                 f'<text x="{230 + BAR}" y="{y + 15}">{funnel["kept"]:,} ({funnel["kept"] / total:.1%})</text></svg>')
    return "".join(parts)


def rules_svg(funnel: dict) -> str:
    rules = [(k, v) for r in funnel["rows"] for k, v in r["rules"].items()]
    if not rules:
        return '<p class="muted">no document was removed</p>'
    top = max(v for _, v in rules) or 1
    h = 22 * len(rules) + 10
    parts = [f'<svg class="chart rules" width="{W}" height="{h}" role="img" aria-label="removals per rule">']
    for i, (k, v) in enumerate(rules):
        y = 5 + 22 * i
        parts.append(f'<text x="0" y="{y + 14}">{_e(k)}</text><rect x="330" y="{y}" width="{480 * v / top:.1f}" '
                     f'height="16" fill="#d55"/><text x="{335 + 480 * v / top:.1f}" y="{y + 14}">{v:,}</text>')
    parts.append("</svg>")
    return "".join(parts)


def thresholds_of(entry: dict, stats: tuple[str, ...] = ()) -> dict[str, list[float]]:
    """Statistic -> every threshold value on it of one step entry of the manifest (a range has two:
    ``min_words`` and ``max_words`` both mark ``words``)."""
    params = entry.get("params", {})
    try:
        named = dict(getattr(resolve(entry["name"]), "thresholds", {}) or {})
    except (LookupError, ImportError):
        named = {}
    out: dict[str, list[float]] = {}

    def mark(stat: str, value: Any) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value) not in out.get(stat, []):
            out.setdefault(stat, []).append(float(value))

    for stat, param in named.items():
        mark(stat, params.get(param))
    cut = entry.get("cut")  # a corpus-wide cut (quality's top_fraction, perplexity's buckets), marked where it applies
    if isinstance(cut, (int, float)) and not isinstance(cut, bool):
        for stat in named:
            out.setdefault(stat, [float(cut)])
    for p, v in params.items():
        if p in stats:
            mark(p, v)  # datatrove's naming: the parameter is named after the statistic
        for prefix in ("min_", "max_"):
            if p.startswith(prefix):
                mark(p[len(prefix):], v)
    return out


def hist_svg(column: str, values: np.ndarray, thresholds: Sequence[float] = ()) -> str:
    """One ledger statistic's histogram: 24 bars, a y-axis with the tallest bar's count, every threshold on
    the statistic marked (both ends of a range)."""
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return ""
    lo, hi = float(values.min()), float(np.percentile(values, 99))  # the last bar holds the top 1%
    if thresholds:
        lo, hi = min(lo, *thresholds), max(hi, *thresholds)
    clipped = hi < float(values.max())
    if hi <= lo:
        hi = lo + 1.0
    counts, _ = np.histogram(np.minimum(values, hi), bins=24, range=(lo, hi))
    top = max(int(counts.max()), 1)
    w, h, pad, axis = 260, 130, 20, 34
    bw = w / len(counts)
    parts = [f'<figure><svg class="chart hist" data-column="{_e(column)}" width="{w + axis}" height="{h + pad}" '
             f'role="img"><g class="y-axis"><line x1="{axis - 2}" x2="{axis - 2}" y1="10" y2="{h}" stroke="#888"/>'
             f'<text x="{axis - 5}" y="18" text-anchor="end">{top:,}</text>'
             f'<text x="{axis - 5}" y="{h}" text-anchor="end">0</text></g><g transform="translate({axis},0)">']
    for i, c in enumerate(counts):
        bh = (h - 10) * c / top
        parts.append(f'<rect x="{i * bw:.1f}" y="{h - bh:.1f}" width="{bw - 1:.1f}" height="{bh:.1f}" fill="#58a"/>')
    for t in thresholds:
        x = w * (t - lo) / (hi - lo)
        parts.append(f'<line class="threshold" x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{h}" stroke="#c00" '
                     f'stroke-width="2" stroke-dasharray="4 2"/>')
    parts.append(f'<text x="0" y="{h + 14}">{_fmt(lo)}</text>'
                 f'<text x="{w}" y="{h + 14}" text-anchor="end">{_fmt(hi)}</text></g></svg>')
    mark = "".join(f", threshold {_fmt(t)}" for t in thresholds)
    mark += f", top 1% in the last bar (max {_fmt(float(values.max()))})" if clipped else ""
    parts.append(f"<figcaption>{_e(column)} ({len(values):,} documents, documents per bar on the y-axis"
                 f"{_e(mark)})</figcaption></figure>")
    return "".join(parts)


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1e4 else f"{x:,.0f}"


def histograms(directory: Path, manifest: dict) -> str:
    """A histogram of every numeric ledger statistic; each column is read alone from the stage's parts."""
    figs = []
    for stage, files in stage_parts(manifest).items():
        schema = stage_schema(directory, files)
        if schema is None:
            continue
        for entry in [e for e in manifest["steps"] if e["stage"] == stage]:
            stats = tuple(c.split(".", 1)[1] for c in schema.names if c.startswith(entry["name"] + "."))
            marks = thresholds_of(entry, stats)
            ids = set(getattr(step_class_of(entry), "id_stats", ()) or ())
            for name in schema.names:
                if not name.startswith(entry["name"] + ".") or name.split(".", 1)[1] in ids:
                    continue
                t = schema.field(name).type
                if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                    continue
                figs.append(hist_svg(name, stage_values(directory, files, name), marks.get(name.split(".", 1)[1], ())))
    return f'<div class="hists">{"".join(f for f in figs if f)}</div>' if figs else '<p class="muted">no numeric statistic</p>'


def clusters_html(step: str, c: dict) -> str:
    """A dedup step's cluster sizes: a bar per size (documents in clusters of that size) and the table."""
    if not c["sizes"]:
        return f'<h3 class="step">{_e(step)}</h3><p class="muted">no duplicate found</p>'
    top = max(r["documents"] for r in c["sizes"]) or 1
    rows = c["sizes"][:30]
    h = 22 * len(rows) + 10
    bars = [f'<svg class="chart clusters" data-step="{_e(step)}" width="{W}" height="{h}" role="img" '
            f'aria-label="cluster sizes of {_e(step)}">']
    for i, r in enumerate(rows):
        y, w = 5 + 22 * i, 480 * r["documents"] / top
        bars.append(f'<text x="0" y="{y + 14}">size {r["size"]:,}</text><rect x="120" y="{y}" width="{w:.1f}" '
                    f'height="16" fill="#a6c"/><text x="{125 + w:.1f}" y="{y + 14}">{r["clusters"]:,} cluster(s), '
                    f'{r["documents"]:,} documents, {r["removed"]:,} removed</text>')
    bars.append("</svg>")
    more = f'<p class="muted">{len(c["sizes"]) - len(rows)} larger sizes not drawn</p>' if len(c["sizes"]) > len(rows) else ""
    table = "".join(f'<tr><td>{r["size"]:,}</td><td>{r["clusters"]:,}</td><td>{r["documents"]:,}</td>'
                    f'<td>{r["removed"]:,}</td></tr>' for r in c["sizes"])
    return (f'<h3 class="step">{_e(step)}</h3><p>{c["clusters"]:,} cluster(s) of duplicates holding '
            f'{c["documents"]:,} documents (largest {c["largest"]:,}); one survivor each. Column '
            f'<code>{_e(c["column"])}</code>.</p>{"".join(bars)}{more}<table class="clusters"><tr><th>size</th>'
            f"<th>clusters</th><th>documents</th><th>removed</th></tr>{table}</table>")


def score_hist_svg(step: str, h: dict) -> str:
    """A step's score histogram over its fixed range, the threshold or corpus-wide cut marked."""
    counts, (lo, hi) = h["counts"], h["range"]
    top = max(max(counts), 1)
    w, ht, pad = 520, 160, 20
    bw = w / len(counts)
    parts = [f'<figure style="width:{w + 12}px"><svg class="chart score-hist" data-column="{_e(h["column"])}" '
             f'width="{w}" height="{ht + pad}" role="img">']
    for i, c in enumerate(counts):
        bh = (ht - 10) * c / top
        parts.append(f'<rect x="{i * bw:.1f}" y="{ht - bh:.1f}" width="{bw - 1:.1f}" height="{bh:.1f}" fill="#58a">'
                     f"<title>{lo + i * (hi - lo) / len(counts):.2f}-{lo + (i + 1) * (hi - lo) / len(counts):.2f}: "
                     f"{c:,}</title></rect>")
    if h.get("cut") is not None:
        x = w * (h["cut"] - lo) / (hi - lo)
        parts.append(f'<line class="threshold" x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{ht}" stroke="#c00" '
                     f'stroke-width="2" stroke-dasharray="4 2"/>')
    parts.append(f'<text x="0" y="{ht + 14}">{_fmt(lo)}</text><text x="{w}" y="{ht + 14}" text-anchor="end">'
                 f"{_fmt(hi)}</text></svg>")
    cut = f", kept at or above {_fmt(h['cut'])}" if h.get("cut") is not None else ""
    parts.append(f"<figcaption>{_e(h['column'])} of {_e(step)} ({h['documents']:,} documents, {h['bins']} bins"
                 f"{_e(cut)})</figcaption></figure>")
    return "".join(parts)


def corpus_html(funnel: dict) -> str:
    parts = []
    for row in funnel["rows"]:
        if row.get("clusters"):
            parts.append(clusters_html(row["step"], row["clusters"]))
        if row.get("histogram"):
            parts.append(f'<h3 class="step">{_e(row["step"])}</h3>{score_hist_svg(row["step"], row["histogram"])}')
    return "".join(parts) or '<p class="muted">no dedup or quality step in this run</p>'


def samples_html(samples: dict[str, list[dict]], per_reason: int = 3) -> str:
    if not samples:
        return '<p class="muted">no document was removed</p>'
    parts = []
    for reason in sorted(samples):
        parts.append(f'<h3 class="reason">{_e(reason)}</h3>')
        for s in samples[reason][:per_reason]:
            more = " …" if s.get("truncated") else ""
            parts.append(f'<p class="muted">{_e(s["source"])}:{_e(s["loc"])} ({_e(s["id"])})</p>'
                         f'<pre class="sample">{_e(s["text"])}{more}</pre>')
    return "".join(parts)


def render_report(directory: Path, manifest: dict, samples: dict[str, list[dict]]) -> str:
    funnel = manifest["funnel"]
    inputs = "".join(f'<tr><td class="l">{_e(i.get("path"))}</td><td class="l">{_e(i.get("format"))}</td>'
                     f'<td class="l">{_e(i.get("kind"))}</td></tr>' for i in manifest.get("inputs", []))
    steps = ", ".join(_e(e["id"]) for e in manifest["steps"]) or "none"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tokenmill curate report</title>'
            f"<style>{CSS}</style></head><body><h1>Curation report</h1>"
            f'<p>{_e(manifest["identity"])}</p><p>steps: {steps}; {_e(_pipeline(manifest["config"]))}</p>'
            f'<table><tr><th class="l">input</th><th class="l">format</th><th class="l">kind</th></tr>{inputs}</table>'
            f'<h2 id="funnel">Funnel</h2><p class="muted">bar: documents left after each step (green) and removed '
            f'by it (red); labels: removed, share of the input / of what reached the step</p>{funnel_svg(funnel)}'
            f'<h2 id="rules">Removals per rule</h2>{rules_svg(funnel)}'
            f'<h2 id="corpus">Dedup clusters and quality scores</h2>{corpus_html(funnel)}'
            f'<h2 id="histograms">Statistics</h2>{histograms(directory, manifest)}'
            f'<h2 id="samples">Removed documents</h2>{samples_html(samples)}</body></html>')


def _pipeline(config: dict) -> str:
    """Where the steps came from: a preset by name, else the pipeline file's own list (never ``preset: None``)."""
    if config.get("preset"):
        return f"preset: {config['preset']}"
    return "steps listed in the pipeline file" if config.get("steps") else "no preset, no steps"


def write_report(directory: Path, manifest: dict, samples: dict[str, list[dict]]) -> Path:
    path = Path(directory) / "report.html"
    atomic_write(path, utf8(render_report(Path(directory), manifest, samples)))
    return path


def utf8(text: str) -> bytes:
    """``text`` as UTF-8, a file name's undecodable bytes (Python keeps them as lone surrogates) shown as
    ``\\xNN``, as the manifest and the rejects show them: a name that is not UTF-8 must not fail the report
    after the run's manifest is written."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte (a JSON "\\ud800" in a sample)
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "backslashreplace").encode("utf-8")
