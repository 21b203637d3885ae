"""What a data card reads of a run (:mod:`tokenmill.report.datacard`): ``manifest.json`` checked for the
shape the card reads, and the ledger files it lists, counted one file at a time.

A card over part of a run would state false counts ("no language step ran" when the ledger files that
hold the language are gone), so a listed ledger file that is missing or that Parquet cannot read (cut,
overwritten) fails naming it, and so does a manifest that is not a JSON object or whose parts have other
types than a run writes.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.errors import InputError
from tokenmill.report.ledger import open_part, part_exists, read_columns, stage_parts

COLUMNS = ("source", "loc", "reason", "license.label", "language.label", "decontaminate.benchmark",
           "robots.blocking_agent", "robots.status", "robots.snapshot", "tdm.source")


def ledger_files(out: Path, manifest: dict) -> list[list[Path]]:
    """The ledger files a card reads, in groups whose rows are merged together: each file of the run's
    one table (:mod:`tokenmill.report.ledger`: a record is in exactly one file) alone, else, for an older
    run, every stage's parts together (a document's rows are spread over them)."""
    table = (manifest.get("decision_ledger") or {}).get("files")
    groups = [[out / rel] for rel in table] if table else \
        [[out / rel for files in stage_parts(manifest).values() for rel in files]]
    missing = [str(p.relative_to(out)) for g in groups for p in g if not part_exists(p)]
    if missing:  # a card over part of the run would state false counts ("no language step ran")
        raise InputError(f"{out}: {len(missing)} ledger file(s) that manifest.json lists are missing "
                         f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); the card cannot count "
                         "their documents. Restore them, or run the command again to write the output anew")
    return groups


def read_rows(paths: list[Path]) -> list[dict]:
    """The rows of ``paths`` (only the columns a card counts)."""
    rows: list[dict] = []
    for path in paths:
        with _readable(path):
            rows.extend(read_columns(path, COLUMNS, present=True).to_pylist())
    return rows


@contextmanager
def _readable(path: Path):
    """A ledger file that Parquet cannot read (cut, overwritten) fails naming it, never as a traceback."""
    try:
        yield
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{path}: the ledger file cannot be read ({exc}); it is damaged or cut. Run the command "
                         "again to write the output anew") from None


def read_batches(path: Path, rows: int = 8192):
    """The rows of one ledger file (only the columns a card counts), ``rows`` at a time: a unit's file as
    Python dicts is tens of MB at 64 MiB units, and the card needs one row at a time."""
    with _readable(path), pq.ParquetFile(open_part(path)) as pf:
        columns = [c for c in COLUMNS if c in pf.schema_arrow.names]
        for batch in pf.iter_batches(batch_size=rows, columns=columns):
            yield batch.to_pylist()


def _final(rows: list[dict]) -> dict[tuple, dict]:
    """One merged row per document (source, loc): every stage's columns, the first reason that removed it."""
    docs: dict[tuple, dict] = {}
    for row in rows:
        key = (row.get("source"), row.get("loc"))
        merged = docs.setdefault(key, {})
        for k, v in row.items():
            if k == "reason":
                merged["reason"] = merged.get("reason") or v
            elif v is not None:
                merged.setdefault(k, v)
    return docs


# what a card counts of a removal: (step, column, rule) -> its key in Tally.removed
REMOVALS = {"decontamination": ("decontaminate", "decontaminate.benchmark", ""),
            "robots": ("robots", "robots.blocking_agent", "disallowed"),
            "tdm": ("tdm", "tdm.source", "reserved")}


@dataclass
class SourceTally:
    records: int = 0
    kept: int = 0
    licences: Counter = field(default_factory=Counter)  # of the kept documents


@dataclass
class Tally:
    """What a card counts over the ledger's documents, summed one ledger file at a time (memory: one file's
    rows, never the run's). Counters keep the order in which values first appear, as one pass would."""

    licences: Counter = field(default_factory=Counter)  # of the kept documents ("unknown" for none)
    languages: Counter = field(default_factory=Counter)  # of the kept documents that have one
    present: set = field(default_factory=set)  # the columns some document has a value in
    sources: dict = field(default_factory=dict)  # source -> SourceTally, in order of first appearance
    removed: dict = field(default_factory=lambda: {k: Counter() for k in REMOVALS})
    robots_status: Counter = field(default_factory=Counter)
    robots_matched: int = 0

    def add(self, docs: dict[tuple, dict]) -> None:
        """Count the merged documents of one group of ledger files (:func:`_final`)."""
        for (source, _loc), d in docs.items():
            self.present.update(d)
            s = self.sources.setdefault(source, SourceTally())
            s.records += 1
            if not d.get("reason"):
                label = d.get("license.label") or "unknown"
                self.licences[label] += 1
                s.kept += 1
                s.licences[label] += 1
                if d.get("language.label"):
                    self.languages[d["language.label"]] += 1
            reason = str(d.get("reason") or "")
            for key, (step, column, rule) in REMOVALS.items():
                if reason.startswith(f"{step}_v") and (not rule or reason.endswith(f":{rule}")):
                    self.removed[key][str(d.get(column))] += 1
            if d.get("robots.status"):
                self.robots_status[d["robots.status"]] += 1
                self.robots_matched += bool(d.get("robots.snapshot"))  # the snapshot had a capture of its host


def tally(out: Path, manifest: dict) -> Tally:
    """The card's counts over the run's ledger, one group of files at a time (:func:`ledger_files`)."""
    acc = Tally()
    for group in ledger_files(out, manifest):
        if len(group) == 1:  # a file of the run's one table: each record is one row, counted a batch at a time
            for rows in read_batches(group[0]):
                acc.add(_final(rows))
        else:
            acc.add(_final(read_rows(group)))
    return acc


# what a card reads of a manifest, and the JSON type each must have when present
MANIFEST_SHAPE = {"counts": dict, "funnel": dict, "sources": dict, "config": dict, "steps": list,
                  "decision_ledger": dict, "stage_ledgers": dict, "tokenizer": dict}


def check_manifest(manifest: Any, path: Path) -> None:
    """A manifest the card can read: a JSON object whose parts the card reads have their types (a list, null
    or hand-edited manifest fails here, naming the part, not as a traceback half-way through the card)."""
    if not isinstance(manifest, dict):
        raise InputError(f"{path}: expected a JSON object (a tokenmill run's manifest), found "
                         f"{type(manifest).__name__ if manifest is not None else 'null'}; run the command again "
                         "to write it anew")
    wrong = [f"{key} ({type(manifest[key]).__name__}, expected {want.__name__})" for key, want in MANIFEST_SHAPE.items()
             if manifest.get(key) is not None and not isinstance(manifest[key], want)]
    files = (manifest.get("decision_ledger") or {}).get("files") if isinstance(manifest.get("decision_ledger"), dict) else None
    if files is not None and not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
        wrong.append("decision_ledger.files (expected a list of paths)")
    if wrong:
        raise InputError(f"{path}: not a manifest the card can read: {', '.join(wrong)}; run the command again to "
                         "write it anew")
