"""The decision ledger of a run: one table, one row per input record, that tells what became of it.

``DIR/ledger/<unit>.parquet`` (one file per input work unit, rows in input order) has the columns:

* ``record`` (``<source>:<loc>``, unique in the run), ``id``, ``source`` (the input path relative to its
  root), ``loc`` (1-based line, row or record of the input), ``url`` (when the input has one);
* ``kept``: whether the record reached the output (``documents/`` or the shards);
* ``reason``: why not: ``rejected:<reason>`` for a record that could not be read (the same reason as in
  ``rejects.jsonl``), else ``<step>_v<version>:<rule>`` of the first step that removed it, corpus steps
  (dedup, a quality top fraction) included; null for a kept record;
* every step's statistics as ``<step>.<stat>`` (the Gopher ratios, ``exact_dedup.group`` and
  ``group_size``, ``minhash_dedup.cluster`` and ``cluster_size``, ``quality.score``, ...), null where the
  step never saw the record.

Invariants (tested on every preset and on Ray): rows = input records, ``record`` unique, kept rows =
documents written, every row not kept has a reason. It is built once at the end of the run from the
stages' own parts (``steps/<stage>/ledger/<unit>.parquet``, the engine's per-stage files, which
``tokenmill funnel --set`` replays) and from the units' rejects, so a resumed run writes the same bytes:
by a curate run's last stage, in its workers (:mod:`tokenmill.curate.workflows.join`), by :func:`write_ledger` in
the driver for ``pretrain --preset`` (one stage).
Cost: one pass over the parts' columns, one unit at a time (memory bounded by a unit, not the corpus).

**Packed stage parts.** Once a curate run's ledger stage has ended (:mod:`tokenmill.curate.workflows.join`), each
stage's parts are no longer one file per unit: they are members of ``steps/<stage>/ledger-<pack>.zip``
(stored, not compressed: each member is the unit's part byte for byte, named ``<unit>.parquet``; ``unzip``
gives the loose files back), one archive per pack of consecutive units. The manifest keeps naming the parts
by their logical paths (``steps/<stage>/ledger/<unit>.parquet``); :func:`part_exists`, :func:`read_columns`
and :func:`file_schema` find a part that is not on disk in its stage's packs, reading the member in place
(a memory-mapped slice of the archive, no copy and no extraction).
"""

from __future__ import annotations

import json
import os
import struct
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.base import segments
from tokenmill.report.rejects import UNIT_DIR

LEDGER_DIR = "ledger"
IDENTITY = ("id", "source", "loc", "url")
REJECTED = "rejected"


def write_ledger(out: Path, stage_parts: dict[str, list[str]], unit_names: list[str]) -> dict:
    """Write ``out/ledger/<unit>.parquet`` for every unit; return the manifest's ``decision_ledger`` entry.

    ``stage_parts``: each stage's ledger part files (relative to ``out``), in stage order; a part belongs to
    the unit whose name is its file's stem.
    """
    out = Path(out)
    by_unit = parts_by_unit(out, stage_parts, unit_names)
    schema = ledger_schema(by_unit)
    entry = new_entry()
    for name in unit_names:
        add_entry(entry, write_unit(out, out, name, by_unit[name], schema))
    return entry


def parts_by_unit(out: Path, stage_parts: dict[str, list[str]], unit_names: Sequence[str]) -> dict[str, list[Path]]:
    """Each unit's ledger parts (absolute paths, in stage order); a part belongs to the unit named by its stem."""
    by_unit: dict[str, list[Path]] = {name: [] for name in unit_names}
    for files in stage_parts.values():
        for rel in files:
            if Path(rel).stem in by_unit:
                by_unit[Path(rel).stem].append(Path(out) / rel)
    return by_unit


def write_unit(out: Path, target: Path, name: str, parts: list[Path], schema: dict[str, pa.DataType]) -> dict | None:
    """Join one unit's ``parts`` (and its rejects, under ``out``) and write ``target/ledger/<name>.parquet``;
    its :func:`new_entry`-shaped entry (one file), or None for a unit with no row."""
    table = unit_ledger(parts, _rejects(Path(out), name))
    if table is None:
        return None
    table = _conform(table, schema)
    rel = f"{LEDGER_DIR}/{name}.parquet"
    (Path(target) / LEDGER_DIR).mkdir(parents=True, exist_ok=True)
    pq.write_table(table, Path(target) / rel, compression="zstd")
    pa.default_memory_pool().release_unused()  # the unit's buffers go back now, not at the next unit's peak
    return {"files": [rel], "rows": table.num_rows, "columns": table.column_names,
            "kept": int(np.sum(table.column("kept").to_numpy(zero_copy_only=False)))}


def new_entry() -> dict:
    """An empty ``decision_ledger`` entry: ``files``, ``rows``, ``kept``, ``columns`` (in first-seen order)."""
    return {"files": [], "rows": 0, "kept": 0, "columns": []}


def add_entry(entry: dict, other: dict | None) -> dict:
    """Add ``other`` (a unit's :func:`write_unit` entry, or a whole pack's) to ``entry``, after its files."""
    if other is not None:
        entry["files"] += other["files"]
        entry["rows"] += other["rows"]
        entry["kept"] += other["kept"]
        entry["columns"] = list(dict.fromkeys([*entry["columns"], *other["columns"]]))
    return entry


def ledger_schema(by_unit: dict[str, list[Path]]) -> dict[str, pa.DataType]:
    """Every column of the run's ledger, in order, with one type for all units: a statistic that is null
    in every row of one unit's part (``decontaminate.benchmark`` where nothing matched) takes the type other
    units give it, so ``pyarrow.parquet.read_table(DIR/"ledger")`` reads the directory as one table."""
    types: dict[str, pa.DataType] = {"record": pa.string(), **{k: _TYPES[k] for k in (*IDENTITY, "kept", "reason")}}
    stages = max((len(parts) for parts in by_unit.values()), default=0)
    for k in range(stages):  # stage order: a unit's k-th part is its k-th stage's
        for parts in by_unit.values():
            if k < len(parts) and part_exists(parts[k]):
                for f in file_schema(parts[k]):
                    if f.name not in types or pa.types.is_null(types[f.name]):
                        types[f.name] = f.type
    return types


def _conform(table: pa.Table, schema: dict[str, pa.DataType]) -> pa.Table:
    """``table`` with every column of ``schema``, in its order and types (missing ones null)."""
    n = table.num_rows
    names = set(table.column_names)
    cols = [table.column(c).cast(t) if c in names and table.column(c).type != t else
            table.column(c) if c in names else pa.nulls(n, t) for c, t in schema.items()]
    extra = [c for c in table.column_names if c not in schema]  # a step that runs twice: its second columns
    return pa.table(cols + [table.column(c) for c in extra], names=[*schema, *extra])


def unit_ledger(parts: list[Path], rejects: list[dict]) -> pa.Table | None:
    """One unit's rows: the first stage's documents joined with every later stage's part, plus the rejects."""
    tables = [read_columns(p) for p in parts if part_exists(p)]
    if not tables and not rejects:
        return None
    docs = _join(tables) if tables else None
    table = _with_rejects(docs, rejects)
    locs = pc.fill_null(table.column("loc"), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    files = _file_ranks(table)
    if files is not None:  # a unit of packed small files: by file (in the unit's order), then line
        return table.take(pa.array(np.lexsort((locs, files))))
    if len(locs) < 2 or bool(np.all(locs[1:] >= locs[:-1])):
        return table  # already in input order (no reject lands among the documents): no copy
    order = np.argsort(locs, kind="stable")
    return table.take(pa.array(order))


def _file_ranks(table: pa.Table) -> np.ndarray | None:
    """Each row's file as its rank among the unit's files (sorted by path, the order a directory's small files
    are packed in); None when the rows come from one file."""
    sources = pc.fill_null(table.column("source").cast(pa.string()), "").combine_chunks()
    names = pc.unique(sources)
    if len(names) < 2:
        return None
    ranked = pa.array(sorted(names.to_pylist()))
    return np.asarray(pc.index_in(sources, value_set=ranked).to_numpy(zero_copy_only=False), dtype=np.int64)


def _keys(table: pa.Table, with_file: bool) -> list:
    """A document's identity across stages: its line, with its file when both parts name it (a unit of packed
    small files); its id where a stage kept no line."""
    ids = table.column("id").to_pylist()
    locs = table.column("loc").to_pylist() if "loc" in table.column_names else [None] * len(ids)
    files = table.column("source").to_pylist() if with_file else [None] * len(ids)
    return [("loc", f, loc) if loc is not None else ("id", i) for f, loc, i in zip(files, locs, ids)]


def _lines(table: pa.Table) -> tuple[np.ndarray, np.ndarray] | None:
    """(order, sorted lines) of a part whose every row has a line (``loc``), all of one file, and no two rows
    share one; None otherwise (its rows are then matched by :func:`_keys`)."""
    if "loc" not in table.column_names:
        return None
    if "source" in table.column_names and pc.count_distinct(table.column("source")).as_py() > 1:
        return None  # a unit of packed small files: lines repeat from file to file
    col = table.column("loc")
    if col.null_count or not pa.types.is_integer(col.type):
        return None
    locs = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)
    order = np.argsort(locs, kind="stable")
    ordered = locs[order]
    if len(ordered) > 1 and not bool(np.all(ordered[1:] != ordered[:-1])):
        return None
    return order, ordered


def _join(tables: list[pa.Table]) -> pa.Table:
    first = tables[0]
    n = first.num_rows
    first_lines = _lines(first)
    index: dict | None = None  # key -> row of ``first``, built only when some part lacks distinct lines
    index_with_file = False
    cols: dict[str, pa.Array] = {c: first.column(c) for c in IDENTITY if c in first.column_names}
    reason = first.column("reason").cast(pa.string())
    stats = {c: first.column(c) for c in first.column_names if c not in (*IDENTITY, "kept", "reason")}
    for later in tables[1:]:
        where = np.full(n, -1, dtype=np.int64)  # per row of ``first``: the row of ``later`` with its key
        later_lines = _lines(later) if first_lines is not None else None
        if first_lines is not None and later_lines is not None:  # both keyed by distinct lines: match by a sort
            order, ordered = first_lines
            theirs = later_lines[1]
            pos = np.searchsorted(ordered, theirs)
            hit = pos < n
            hit[hit] = ordered[pos[hit]] == theirs[hit]
            where[order[pos[hit]]] = later_lines[0][hit]
        else:
            with_file = "source" in first.column_names and "source" in later.column_names
            if index is None or index_with_file != with_file:
                index, index_with_file = {k: i for i, k in enumerate(_keys(first, with_file))}, with_file
            for j, k in enumerate(_keys(later, with_file)):
                i = index.get(k)
                if i is not None:
                    where[i] = j
        picks = pa.array(where, mask=where < 0)
        for c in later.column_names:
            if c in (*IDENTITY, "kept", "reason"):
                continue
            name = c if c not in stats else f"{c}@{len(stats)}"  # one step twice in a workflow: both kept
            stats[name] = later.column(c).take(picks)
        reason = pc.coalesce(reason, later.column("reason").cast(pa.string()).take(picks))  # the first stage's reason
    reason = reason.combine_chunks() if isinstance(reason, pa.ChunkedArray) else reason
    cols["url"] = cols.get("url", pa.nulls(n, pa.string()))
    cols["kept"] = pc.is_null(reason)
    cols["reason"] = reason
    return pa.table({**cols, **stats})


def _with_rejects(docs: pa.Table | None, rejects: list[dict]) -> pa.Table:
    """``docs`` with a row per rejected record appended (statistics null), and the ``record`` column first."""
    rows = {"id": [None] * len(rejects), "source": [r.get("source") for r in rejects],
            "loc": [r.get("loc") for r in rejects], "url": [None] * len(rejects), "kept": [False] * len(rejects),
            "reason": [f"{REJECTED}:{r.get('reason')}" for r in rejects]}
    if docs is None:
        table = pa.table({k: pa.array(v, type=_TYPES[k]) for k, v in rows.items()})
    else:
        extra = pa.table({c: pa.array(rows[c], type=docs.schema.field(c).type) if c in rows
                          else pa.nulls(len(rejects), docs.schema.field(c).type) for c in docs.column_names})
        table = pa.concat_tables([docs.cast(extra.schema) if docs.schema != extra.schema else docs, extra])
    source = pc.fill_null(table.column("source").cast(pa.string()), "None")  # as f"{source}:{loc}" writes them
    loc = pc.fill_null(table.column("loc").cast(pa.string()), "None")
    record = pc.binary_join_element_wise(source, loc, ":").combine_chunks()
    return table.add_column(0, "record", record)


_TYPES = {"id": pa.string(), "source": pa.string(), "loc": pa.int64(), "url": pa.string(), "kept": pa.bool_(),
          "reason": pa.string()}


def _rejects(out: Path, unit: str) -> list[dict]:
    path = out / UNIT_DIR / f"{unit}.jsonl"
    if not path.exists():
        return []
    rows = []
    with open(path, "rb") as fh:
        for line in fh:
            r = json.loads(line)
            rows.append({"source": r.get("source"), "loc": r.get("loc"), "reason": r.get("reason")})
    return rows


def stage_parts(manifest: dict) -> dict[str, list[str]]:
    """Each stage's ledger part files of a run (``stage_ledgers``; ``ledger`` in older manifests)."""
    parts = manifest.get("stage_ledgers")
    if parts is None and isinstance(manifest.get("ledger"), dict):
        parts = manifest["ledger"]
    return parts or {}


def read_stage_parts(directory: Path, files: list[str]) -> pa.Table | None:
    """One stage's ledger parts of a run, concatenated (None when it wrote none)."""
    tables = [read_columns(Path(directory) / f) for f in files if part_exists(Path(directory) / f)]
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="permissive")


def read_columns(path: Path, columns: Sequence[str] | None = None, *, present: bool = False) -> pa.Table:
    """``pq.read_table(path, columns=columns)`` for one file, through its footer alone: ``read_table`` builds a
    dataset on every call, about ten times the cost of the read for a unit's small ledger part, and the
    report and the funnel read every part once per column. ``present``: only those of ``columns`` the file
    has (none is an error)."""
    with pq.ParquetFile(open_part(path)) as pf:
        if columns is not None and present:
            columns = [c for c in columns if c in pf.schema_arrow.names]
        return pf.read(columns=list(columns) if columns is not None else None)


def file_schema(path: Path) -> pa.Schema:
    """The Arrow schema of one Parquet file, from its footer."""
    with pq.ParquetFile(open_part(path)) as pf:
        return pf.schema_arrow


def stage_schema(directory: Path, files: list[str]) -> pa.Schema | None:
    """The schema :func:`read_stage_parts` would give, from the parts' footers alone (None when none exists)."""
    schemas = [file_schema(Path(directory) / f) for f in files if part_exists(Path(directory) / f)]
    return pa.unify_schemas(schemas, promote_options="permissive") if schemas else None


def stage_values(directory: Path, files: list[str], column: str) -> np.ndarray:
    """One numeric column of a stage's ledger parts as float64 (nulls NaN; parts without it add nothing),
    read one part and one column at a time: 8 bytes per document, not the stage's whole table."""
    pieces = []
    for f in files:
        path = Path(directory) / f
        table = read_columns(path, [column], present=True) if part_exists(path) else None
        if table is not None and table.num_columns:
            pieces.append(np.asarray(table.column(column).to_numpy(zero_copy_only=False), dtype=np.float64))
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float64)


PACK_PREFIX = "ledger-"


def pack_name(stage_dir: str, pack: str) -> str:
    """The archive of pack ``pack`` of the stage whose parts live in ``stage_dir`` (``steps/<stage>/ledger``)."""
    return f"{Path(stage_dir).parent.as_posix()}/{PACK_PREFIX}{pack}.zip"


def write_pack(target: Path, members: Sequence[tuple[str, Path]]) -> None:
    """Write the stored (uncompressed) zip ``target`` of ``members`` (``(name, file)``, in order), with fixed
    timestamps and attributes: the same members give the same bytes on every run and machine."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, path in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            info.file_size = segments.size(path)
            with segments.open_slice(path) as src, zf.open(info, "w", force_zip64=info.file_size >= zipfile.ZIP64_LIMIT) as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)


_INDEX: dict[str, tuple[int, dict[str, tuple[str, int, int, tuple[int, int]]]]] = {}  # folder -> (its mtime, parts)
_INDEX_LOCK = threading.Lock()


def _members(archive: str) -> dict[str, tuple[int, int]]:
    """``{member name: (data offset, size)}`` of one stored archive (a member not stored is left out: not
    written by tokenmill, it is read in place or not at all)."""
    members: dict[str, tuple[int, int]] = {}
    with zipfile.ZipFile(archive) as zf, open(archive, "rb") as fh:
        for info in zf.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                continue
            fh.seek(info.header_offset)
            header = fh.read(30)
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            members[info.filename] = (info.header_offset + 30 + name_len + extra_len, info.file_size)
    return members


def _folder_index(folder: str) -> dict[str, tuple[str, int, int, tuple[int, int]]]:
    """Every packed part of one stage folder: ``{name: (archive, offset, size, (archive size, mtime))}``, the
    first archive in name order winning."""
    index: dict[str, tuple[str, int, int, tuple[int, int]]] = {}
    with os.scandir(folder) as entries:
        archives = sorted(e.path for e in entries if e.name.startswith(PACK_PREFIX) and e.name.endswith(".zip"))
    for archive in archives:
        st = os.stat(archive)
        for name, (offset, size) in _members(archive).items():
            index.setdefault(name, (archive, offset, size, (st.st_size, st.st_mtime_ns)))
    return index


def _packed(path: Path) -> tuple[str, int, int] | None:
    """``(archive, offset, size)`` of the part ``path`` (``.../steps/<stage>/ledger/<unit>.parquet``) inside
    its stage's packs, or None. The folder's archives are indexed once per version of the folder (its
    mtime), so a reader of every part costs one stat per part, not a listing and a look into every archive;
    an archive rewritten in place since (another size or mtime) has its folder indexed again."""
    folder = str(path.parent.parent)
    try:
        stamp = os.stat(folder).st_mtime_ns
    except (FileNotFoundError, NotADirectoryError):
        return None
    with _INDEX_LOCK:
        cached = _INDEX.get(folder)
    for fresh in (False, True):
        if fresh or cached is None or cached[0] != stamp:
            cached = (stamp, _folder_index(folder))
            with _INDEX_LOCK:
                if len(_INDEX) > 4096:
                    _INDEX.clear()
                _INDEX[folder] = cached
        hit = cached[1].get(path.name)
        if hit is None:
            return None
        archive, offset, size, version = hit
        try:
            st = os.stat(archive)
        except FileNotFoundError:
            continue
        if (st.st_size, st.st_mtime_ns) == version:
            return archive, offset, size
    return None


def part_exists(path: Path) -> bool:
    """Whether the ledger part ``path`` is there: as a file, in a segment file of its stage's folder (a run
    whose ledger stage has not ended, :mod:`tokenmill.base.segments`), or as a member of its stage's packs."""
    return segments.exists(Path(path)) or _packed(Path(path)) is not None


def open_part(path: Any) -> Any:
    """What ``pq.ParquetFile`` or ``pq.read_table`` opens for the ledger part ``path``: the path itself, or its
    packed member's bytes in place (a zero-copy slice of the memory-mapped archive)."""
    if not isinstance(path, (str, Path)):
        return path
    if segments.exists(Path(path)):  # the file itself, or its slice of a segment
        return segments.arrow_source(Path(path))
    hit = _packed(Path(path))
    if hit is None:
        return path  # missing: the reader's own error names it
    archive, offset, size = hit
    return pa.BufferReader(pa.memory_map(archive).read_at(size, offset))  # the slice keeps the mapping alive


def read_ledger(directory: str | Path, manifest: dict | None = None) -> pa.Table | None:
    """The whole decision ledger of a run directory (every unit's file, in unit order), or None."""
    directory = Path(directory)
    entry = (manifest or {}).get("decision_ledger") or {}
    files = [directory / f for f in entry.get("files", [])] or sorted((directory / LEDGER_DIR).glob("*.parquet"))
    tables = [read_columns(f) for f in files if f.exists()]
    return pa.concat_tables(tables, promote_options="permissive") if tables else None


def ledger_problems(directory: str | Path, manifest: dict, *, kept_documents: int | None = None) -> list[str]:
    """Where a run's ledger breaks its invariants (module docstring); ``kept_documents``: documents written
    (default: the manifest's kept count)."""
    table = read_ledger(directory, manifest)
    if table is None:
        return ["no decision ledger"]
    problems = []
    counts = manifest["counts"]
    if table.num_rows != counts["input"]:
        problems.append(f"{table.num_rows} ledger rows for {counts['input']} input records")
    records = table.column("record").to_pylist()
    if len(set(records)) != len(records):
        problems.append(f"{len(records) - len(set(records))} duplicate record keys")
    kept = table.column("kept").to_pylist()
    want = counts["kept"] if kept_documents is None else kept_documents
    if sum(kept) != want:
        problems.append(f"{sum(kept)} kept rows for {want} documents written")
    reasons = table.column("reason").to_pylist()
    if any(not k and r is None for k, r in zip(kept, reasons)):
        problems.append("a removed record without a reason")
    if any(k and r is not None for k, r in zip(kept, reasons)):
        problems.append("a kept record with a reason")
    removed = {**{f"{REJECTED}:{k}": v for k, v in counts["rejected"].items()}, **counts["filtered"]}
    seen: dict[str, int] = {}
    for r in reasons:
        if r is not None:
            seen[r] = seen.get(r, 0) + 1
    if seen != {k: v for k, v in removed.items() if v}:
        problems.append(f"reasons {seen} differ from the counts {removed}")
    return problems
