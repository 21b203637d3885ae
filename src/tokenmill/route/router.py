"""``inspect``: one :class:`Route` per input file, from a sample of its records; and its renderers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields

from tokenmill.io import expand_inputs, sample_records
from tokenmill.route.classify import classify_rows
from tokenmill.route.mapping import field_keys

KINDS = ("pretrain", "sft", "preference", "unknown")


@dataclass
class Route:
    """Where one input file belongs, how sure the router is, and how its fields map onto records."""

    path: str
    format: str
    kind: str  # one of KINDS
    confidence: float  # 0..1: share of sampled records that agree with the decision
    records_sampled: int
    evidence: dict = field(default_factory=dict)  # the counts behind the decision
    schema: dict = field(default_factory=dict)  # field mapping (see tokenmill.route.schema)
    warnings: list[str] = field(default_factory=list)
    fields: dict[str, list[str]] = field(default_factory=dict)  # fields sampled -> their keys one level down

    def to_dict(self) -> dict:
        """The route as plain values (its dicts and lists shared, not copied: a manifest lists thousands)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def inspect(paths: list[str], *, sample: int = 200, text_mode: str = "auto") -> list[Route]:
    """Classify every file the ``paths`` resolve to, reading at most ``sample`` records of each."""

    return [inspect_file(f, sample=sample, text_mode=text_mode) for f in expand_inputs(paths, text_mode=text_mode)]


def inspect_file(file, *, sample: int = 200, text_mode: str = "auto") -> Route:
    """The :class:`Route` of one resolved ``InputFile``."""

    rows, _locs, rejects = sample_records(file, n=sample, text_mode=text_mode)
    kind, confidence, evidence, schema, warnings = classify_rows(rows, format=file.format)
    if rejects:
        evidence["rejects"] = dict(_count_reasons(rejects))
        warnings = [
            f"{len(rejects)} sampled records could not be read (first: {rejects[0].reason} at "
            f"{rejects[0].source}:{rejects[0].loc})",
            *warnings,
        ]
    return Route(file.path, file.format, kind, confidence, len(rows), evidence, schema, warnings, field_keys(rows))


def render_json(routes: list[Route]) -> str:
    return json.dumps([r.to_dict() for r in routes], indent=2, ensure_ascii=False, default=str)


def render_table(routes: list[Route]) -> str:
    """A short human table: path, format, kind, confidence, records sampled (the records routing read, not the
    file's count), schema summary; warnings below each."""
    header = ("path", "format", "kind", "conf", "sampled", "schema")
    lines = [
        (r.path, r.format, r.kind, f"{r.confidence:.2f}", str(r.records_sampled), schema_summary(r.schema))
        for r in routes
    ]
    widths = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h) for i, h in enumerate(header)]
    out = [_row(header, widths)]
    for route, cells in zip(routes, lines):
        out.append(_row(cells, widths))
        out.extend(f"    ! {w}" for w in route.warnings)
    return "\n".join(out)


def schema_summary(schema: dict) -> str:
    """One line: ``Document text=text url=metadata.url`` / ``Conversation/sharegpt conversations[from/value]``."""
    record = schema.get("record") or ("preference" if schema.get("style") == "preference" else "unknown")
    style = schema.get("style")
    head = f"{record}/{style}" if style and style != "preference" else record
    if style in ("sharegpt", "messages"):
        return f"{head} {schema['messages']}[{schema['role_key']}/{schema['content_key']}]" + _extras(schema)
    keys = ("text", "chosen", "rejected", "prompt", "response", "instruction", "input", "output", "url")
    parts = [f"{k}={schema[k]}" for k in keys if schema.get(k)]
    if record == "unknown":
        parts = [f"columns={','.join(map(str, schema.get('columns', [])))}"]
    return " ".join([head, *parts]) + _extras(schema)


def _extras(schema: dict) -> str:
    extra = [f"{k}={schema[k]}" for k in ("system", "tools", "reasoning", "reasoning_key") if schema.get(k)]
    return "".join(" " + e for e in extra)


def _row(cells, widths) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()


def _count_reasons(rejects) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rejects:
        counts[r.reason] = counts.get(r.reason, 0) + 1
    return counts
