"""``plan.html``: the mixture over training as a stacked-area chart (inline SVG) and a table per phase.

Self-contained: no script, no external file; every text from the recipe is escaped.
"""

from __future__ import annotations

from html import escape

COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
          "#bab0ac"]
WIDTH, HEIGHT, PAD = 760, 260, 40

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:60em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}.warn{color:#a33}.key span{display:inline-block;width:1em;height:1em;
margin:0 .3em 0 1em;vertical-align:middle}svg text{font-size:11px}"""


def render_plan_html(plan: dict) -> str:
    names = list(plan["sources"])
    colors = {n: COLORS[i % len(COLORS)] for i, n in enumerate(names)}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>training plan</title><style>{STYLE}</style>"
             f"</head><body><h1>Training plan</h1><p>{escape(str(plan['recipe']))}: {plan['total_steps']:,} steps, "
             f"global batch {plan['global_batch']}, {plan['tokens_drawn']:,} tokens drawn</p>",
             _warnings(plan["warnings"]), "<h2>Mixture over training</h2>", _chart(plan, colors), _key(names, colors),
             "<h2>Sources</h2>", _source_table(plan)]
    parts += [_phase_table(p) for p in plan["phases"]]
    return "\n".join(parts) + "\n</body></html>\n"


def _warnings(warnings: list[str]) -> str:
    if not warnings:
        return "<p>No warnings.</p>"
    return "<h2>Warnings</h2><ul>" + "".join(f"<li class='warn'>{escape(w)}</li>" for w in warnings) + "</ul>"


def _chart(plan: dict, colors: dict) -> str:
    """Share of each source's tokens between consecutive curve points, stacked to 1, against the step."""
    steps, tokens = plan["curve"]["steps"], plan["curve"]["tokens"]
    last = max(steps[-1], 1)
    x = [PAD + (WIDTH - 2 * PAD) * s / last for s in steps]
    totals = [sum(tokens[n][i] for n in tokens) or 1 for i in range(len(steps) - 1)]
    below = [0.0] * (len(steps) - 1)
    shapes = []
    for name in tokens:
        top = [b + tokens[name][i] / totals[i] for i, b in enumerate(below)]
        shapes.append(f"<path class='area' fill='{colors[name]}' d='{_band(x, below, top)}'>"
                      f"<title>{escape(name)}</title></path>")
        below = top
    lines = [_phase_line(plan, p, last) for p in plan["phases"][1:]]
    axis = (f"<line x1='{PAD}' y1='{HEIGHT - PAD}' x2='{WIDTH - PAD}' y2='{HEIGHT - PAD}' stroke='#333'/>"
            f"<text x='{PAD}' y='{HEIGHT - PAD + 16}'>step 0</text>"
            f"<text x='{WIDTH - PAD}' y='{HEIGHT - PAD + 16}' text-anchor='end'>step {last:,}</text>"
            f"<text x='{PAD - 4}' y='{PAD + 4}' text-anchor='end'>100%</text>"
            f"<text x='{PAD - 4}' y='{HEIGHT - PAD}' text-anchor='end'>0%</text>")
    return (f"<svg class='mixture' xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{HEIGHT}' "
            f"viewBox='0 0 {WIDTH} {HEIGHT}'>" + "".join(shapes + lines) + axis + "</svg>")


def _y(share: float) -> float:
    return HEIGHT - PAD - (HEIGHT - 2 * PAD) * share


def _band(x: list[float], below: list[float], top: list[float]) -> str:
    """A path over intervals ``[x[i], x[i+1]]`` between ``below[i]`` and ``top[i]`` (steps: constant per interval)."""
    upper = [f"{x[i]:.1f},{_y(t):.1f} {x[i + 1]:.1f},{_y(t):.1f}" for i, t in enumerate(top)]
    lower = [f"{x[i + 1]:.1f},{_y(b):.1f} {x[i]:.1f},{_y(b):.1f}" for i, b in reversed(list(enumerate(below)))]
    return "M" + " L".join(upper + lower) + " Z"


def _phase_line(plan: dict, phase: dict, last: int) -> str:
    x = PAD + (WIDTH - 2 * PAD) * phase["start_step"] / last
    return (f"<line class='phase' x1='{x:.1f}' y1='{PAD - 10}' x2='{x:.1f}' y2='{HEIGHT - PAD}' stroke='#000' "
            f"stroke-dasharray='4 3'/><text x='{x + 3:.1f}' y='{PAD - 12}'>{escape(phase['name'])}</text>")


def _key(names: list[str], colors: dict) -> str:
    return "<p class='key'>" + "".join(f"<span style='background:{colors[n]}'></span>{escape(n)}" for n in names) + "</p>"


def _source_table(plan: dict) -> str:
    rows = "".join(f"<tr><td>{escape(n)}</td><td>{s['track'] or '-'}</td><td>{s['tokens_available']:,}</td>"
                   f"<td>{s['tokens_drawn']:,}</td><td>{s['epochs']:.2f}</td>"
                   f"<td>{100 * s.get('repeated_share', 0):.1f}%</td><td>{100 * s.get('unread_share', 0):.1f}%</td></tr>"
                   for n, s in plan["sources"].items())
    return ("<table class='sources'><tr><th>source</th><th>track</th><th>tokens available</th><th>tokens drawn</th>"
            f"<th>epochs</th><th>read more than once</th><th>never read</th></tr>{rows}</table>")


def _phase_table(p: dict) -> str:
    rows = "".join(f"<tr><td>{escape(s)}</td><td>{n:,}</td><td>{100 * p['share'][s]:.1f}%</td>"
                   f"<td>{p['samples_by_source'][s]:,}</td><td>{100 * p['long_doc_share'][s]:.1f}%</td></tr>"
                   for s, n in p["tokens"].items())
    head = (f"<h2 class='phase'>Phase {escape(p['name'])}</h2><p>steps {p['start_step']:,} to {p['end_step']:,}, "
            f"seq_len {p['seq_len']:,}, {p['samples']:,} samples, packing efficiency "
            f"{100 * p['packing_efficiency']:.1f}%{', every token trained' if p['ignore_loss_mask'] else ''}</p>")
    return (head + "<table class='phase'><tr><th>source</th><th>tokens</th><th>share</th><th>samples</th>"
            f"<th>tokens in docs longer than seq_len</th></tr>{rows}</table>")
