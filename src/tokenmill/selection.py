"""Which inputs and records a run takes: ``--exclude``, ``--skip-misrouted``, ``--limit``, ``--dry-run``.

- ``exclude``: glob patterns matched against each input's path relative to its root and its full path
  (``*.warc.gz``, ``raw/**``); excluded inputs are named in the manifest (``config.excluded``).
- ``skip_misrouted``: inputs the router gives to the other track (preference pairs included) are left out
  instead of refusing the run; each is named with its kind in the manifest (``config.skipped_inputs``).
- An optional dependency missing for several inputs (WARC without the ``warc`` extra) is reported once,
  naming the inputs, the install line, and ``--exclude`` as the way around it.
- ``limit``: only the first N records (kept or rejected) of every input are read, for a trial run.
- ``dry run``: route and plan, then print what would run and how big it is; nothing is written.
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from tokenmill.errors import InputError, MissingExtraError
from tokenmill.route import inspect_file

if TYPE_CHECKING:
    from pathlib import Path

    from tokenmill.base.accounting import Stats
    from tokenmill.base.inputs import WorkUnit
    from tokenmill.io.base import RawBatch
    from tokenmill.job.inputs import Inputs

_LISTED = 5


def exclude_files(files: list, patterns: Iterable[str]) -> tuple[list, list[str]]:
    """(inputs kept, relative paths excluded) for glob ``patterns`` over ``rel`` and the full path."""
    patterns = list(patterns)
    if not patterns:
        return files, []
    kept, excluded = [], []
    for f in files:
        hit = any(fnmatch.fnmatch(f.rel, p) or fnmatch.fnmatch(str(f.path), p) for p in patterns)
        (excluded if hit else kept).append(f)
    if not kept:
        raise InputError(f"--exclude {' '.join(patterns)} leaves no input of the {len(files)} found")
    return kept, [f.rel for f in excluded]


def route_all(files: list, *, text_mode: str) -> list:
    """The router's decision for every input; a missing optional dependency is reported once for all."""
    routes, missing = [], defaultdict(list)
    for f in files:
        try:
            routes.append(inspect_file(f, text_mode=text_mode))
        except MissingExtraError as exc:
            missing[(exc.module, exc.extra, _purpose(exc))].append(f.rel)
    if missing:
        (module, extra, purpose), rels = next(iter(missing.items()))
        shown = ", ".join(rels[:_LISTED]) + (f" and {len(rels) - _LISTED} more" if len(rels) > _LISTED else "")
        raise MissingExtraError(module, extra, f"{purpose} ({len(rels)} input(s): {shown}; or leave them out "
                                               "with --exclude GLOB)")
    return routes


def _purpose(exc: MissingExtraError) -> str:
    text = str(exc)
    return text.split(" is needed to ", 1)[1].split("; install it", 1)[0] if " is needed to " in text else "run"


def split_misrouted(track: str, files: list, routes: list, given: dict) -> tuple[list, list, list[dict]]:
    """Inputs of ``track`` (and explicitly mapped ones) kept; the others described for the manifest."""
    kept_files, kept_routes, skipped = [], [], []
    for f, r in zip(files, routes):
        mapped = f.rel in given or "*" in given
        if mapped or r.kind == track:
            kept_files.append(f)
            kept_routes.append(r)
        else:
            skipped.append({"path": f.rel, "kind": r.kind, "confidence": r.confidence,
                            "why": "; ".join(r.warnings) if getattr(r, "warnings", None) else ""})
    if not kept_files:
        raise InputError(f"--skip-misrouted leaves no input for the {track} track: every input is of another "
                         f"kind ({', '.join(sorted({s['kind'] for s in skipped}))})")
    return kept_files, kept_routes, skipped


def per_source(units: list, results: list) -> dict[str, dict[str, int]]:
    """Records read, kept and tokens written for every input (summed over its units), in input order: a unit
    of packed files gives each file's own counts (``data["sources"]``, see :func:`count_sources`)."""
    out: dict[str, dict[str, int]] = {}
    for unit, result in zip(units, results):
        stats = result.stats
        rows = result.data.get("sources") or {
            unit.file.rel: {"records": stats.input, "kept": stats.kept, "tokens": stats.tokens}}
        for rel, counts in rows.items():
            row = out.setdefault(rel, {"records": 0, "kept": 0, "tokens": 0})
            for key in row:
                row[key] += counts[key]
    return out


def count_sources(batches: Iterable[RawBatch], stats: Stats, into: dict[str, dict[str, int]]) -> Iterator[RawBatch]:
    """``batches`` unchanged; the records, kept and tokens ``stats`` gains while each batch is read and then
    processed (until the next one is asked for) are added to ``into[batch.source]``: a packed unit's counts
    per file, for :func:`per_source`."""
    source, mark = None, (0, 0, 0)

    def add() -> None:
        if source is not None:
            row = into.setdefault(source, {"records": 0, "kept": 0, "tokens": 0})
            row["records"] += stats.input - mark[0]
            row["kept"] += stats.kept - mark[1]
            row["tokens"] += stats.tokens - mark[2]

    for raw in batches:
        add()
        source, mark = raw.source, (stats.input, stats.kept, stats.tokens)
        yield raw
    add()


def file_counts(work: WorkUnit) -> dict[str, dict[str, int]]:
    """Zero counts for every file of a work unit, in its order (a file that yields no batch still has its row)."""
    return {f.rel: {"records": 0, "kept": 0, "tokens": 0} for f in work.files}


def input_plan(workflow: str, planned: Inputs, out: str | Path, config: dict) -> dict:
    """What a run of ``workflow`` would read: each input with its route, size and units (a dry run)."""
    units_per_file: dict[str, int] = defaultdict(int)
    for u in planned.units:
        for f in u.files:  # a file packed with others counts the unit it shares
            units_per_file[f.rel] += 1
    inputs = [{"path": f.rel, "format": f.format, "kind": r.kind, "confidence": r.confidence, "bytes": f.size,
               "units": units_per_file[f.rel]} for f, r in zip(planned.files, planned.routes)]
    return {"dry_run": True, "track": workflow, "out": str(out), "inputs": inputs, "units": len(planned.units),
            "bytes": sum(f.size for f in planned.files), "config": config}


def render_plan(plan: dict) -> str:
    """The dry-run plan as text."""
    lines = [f"dry run: `tokenmill {plan['track']}` would process {len(plan['inputs'])} input(s), "
             f"{plan['bytes']:,} bytes in {plan['units']} work unit(s) -> {plan['out']} (nothing written)"]
    for i in plan["inputs"]:
        lines.append(f"  {i['path']}: {i['format']}, {i['kind']} ({i['confidence']:.2f}), {i['bytes']:,} bytes, "
                     f"{i['units']} unit(s)")
    for key, what in (("excluded", "excluded"), ("skipped_inputs", "skipped (other kind)")):
        for item in plan["config"].get(key) or []:
            lines.append(f"  {item['path'] if isinstance(item, dict) else item}: {what}")
    tok = plan.get("tokenizer")
    if tok:
        lines.append(f"tokenizer: {tok.get('name')} (vocab {tok.get('vocab_size') or 0:,}, fingerprint "
                     f"{str(tok.get('fingerprint'))[:12]})")
    if plan.get("steps"):
        lines.append(f"steps: {', '.join(plan['steps'])}")
    if plan["config"].get("limit"):
        lines.append(f"limit: the first {plan['config']['limit']:,} records of every input")
    split = plan["config"].get("val_split")
    if split:
        how = (f"exactly {split['val_count']:,} records (a ranking pass, then the shards)" if split.get("val_count")
               else f"a fraction {split['val_fraction']} of the records")
        lines.append(f"validation split: {how}, seed {split['val_seed']} -> {plan['out']}/val")
    return "\n".join(lines)
