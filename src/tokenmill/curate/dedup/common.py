"""What the three dedup steps share: the upstream documents, global ids, hash-range shuffles, the last stage.

Global ids. Document ``row`` of upstream unit ``u`` (in unit order) is ``u << 32 | row``: sorting by it is
the (unit, row) order of the input, so "the earliest" is the smallest id, whatever the number of workers.

Shuffles. A map unit writes one file per unit, ``<dir>/parts.bin``: its columns sorted by partition and
the partition offsets (``P + 1`` entries: partition ``p`` is rows ``offsets[p]:offsets[p+1]``), one file
where a file per column used to be (a unit's shuffle is then one file written and one opened per slice,
not four or five). A grouped unit reads its slice from every map unit with positioned reads, so only that
slice is ever in memory. Partitions are hash ranges: the high 32 bits of a 64-bit hash times ``P``,
shifted down (:func:`partition_of`).

``parts.bin``: the bytes ``TMPARTS1``, the header's length (8 bytes, little-endian), the header (JSON: per
column its dtype, length and byte position; the offsets are the first column), then each array's bytes
from a position that is a multiple of 64. A reader of one partition reads the header, two offsets and its
rows of each column it needs, never a whole column.

The documents stage that ends each step (:class:`ApplyTask`) writes, per upstream unit, the surviving rows
to ``steps/<step>/docs/<unit>.parquet`` and the ledger part (``id``, ``source``, ``loc`` where the
documents carry it, the step's columns, ``kept``, ``reason``) to ``steps/<step>/ledger/<unit>.parquet``; its
results carry ``data["docs"]``, ``data["ledger"]`` and ``data["unit"]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.base import segments
from tokenmill.curate.dedup.nfkc import nfkc
from tokenmill.engine.outputs import Documents, Partitioned, as_data, outputs
from tokenmill.engine.stage import StageContext, Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.report.accounting import Stats
from tokenmill.steps.contract import Step, step_params

MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
ROW_BITS = 32


# --- upstream documents ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DocsPart:
    """One unit of the upstream documents stage: its name, docs file and ledger file (relative paths)."""

    index: int
    name: str
    docs: str
    ledger: str | None
    rows: int
    size: int = 0  # bytes of the docs file


def upstream_parts(ctx: StageContext, upstream: str) -> list[DocsPart]:
    """The upstream documents stage's units, in unit order, with their row counts and file sizes: from the
    results (a stage that has ended may have dropped the files), from the files for results that lack them."""
    if upstream not in ctx.results:
        raise ConfigError(f"stage {upstream!r} has not run before this step; it must be a documents stage")
    parts = []
    for i, out in enumerate(outputs(ctx.results[upstream], Documents, stage=upstream)):
        name = out.unit or Path(out.docs).name.removesuffix(".parquet")
        rows = out.rows if out.rows is not None else pq.read_metadata(segments.arrow_source(ctx.out / out.docs)).num_rows
        size = out.size if out.size is not None else segments.size(ctx.out / out.docs)
        parts.append(DocsPart(i, name, out.docs, out.ledger, rows, size))
    return parts


def partitioned(ctx: StageContext, stage: str) -> tuple[tuple[str, ...], int]:
    """The directories a partitioned map stage wrote, in unit order, and its number of partitions."""
    parts = outputs(ctx.results[stage], Partitioned, stage=stage)
    return tuple(p.dir for p in parts), (parts[0].partitions if parts else 1)


def global_ids(unit_index: int, n: int) -> np.ndarray:
    return (np.int64(unit_index) << ROW_BITS) | np.arange(n, dtype=np.int64)


def unit_of(ids: np.ndarray) -> np.ndarray:
    return ids >> ROW_BITS


def row_of(ids: np.ndarray) -> np.ndarray:
    return ids & ((1 << ROW_BITS) - 1)


def n_partitions(total_rows: int, partition_rows: int) -> int:
    if partition_rows < 1:
        raise ConfigError(f"the partition size must be at least 1 row, not {partition_rows}")
    return max(1, -(-int(total_rows) // int(partition_rows)))


# --- hashing --------------------------------------------------------------------------------------


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, vectorised: a bijection of uint64 that spreads every input bit."""
    x = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def partition_of(h: np.ndarray, parts: int) -> np.ndarray:
    """Hash range of each 64-bit hash: ``(h >> 32) * parts >> 32``, in ``[0, parts)``."""
    return ((np.asarray(h, dtype=np.uint64) >> np.uint64(32)) * np.uint64(parts) >> np.uint64(32)).astype(np.int64)


_BASE = np.uint64(0x100000001B3)  # the FNV prime, odd
_POWERS: list[np.ndarray] = [np.ones(1, dtype=np.uint64)]


def _powers(n: int) -> np.ndarray:
    """``B**0 .. B**(n-1)`` mod 2**64 (cached, grown by doubling)."""
    if len(_POWERS[0]) < n:
        size = max(n, 2 * len(_POWERS[0]))
        table = np.full(size, _BASE, dtype=np.uint64)
        table[0] = 1
        with np.errstate(over="ignore"):
            _POWERS[0] = np.cumprod(table, dtype=np.uint64)
    return _POWERS[0][:n]


def hash_strings(strings: pa.Array, *, seed: int = 0) -> np.ndarray:
    """A 64-bit hash of every string of an Arrow string array, vectorised over the bytes.

    ``h = mix64(sum_i byte_i * B**i + len * C + seed)`` (arithmetic mod 2**64): one multiply-add per byte in
    numpy, no Python loop. Not cryptographic; equal strings always get equal hashes.
    """
    strings = strings.cast(pa.large_string()) if strings.type != pa.large_string() else strings
    n = len(strings)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset:strings.offset + n + 1]
    data = strings.buffers()[2]
    base = int(offsets[0])
    raw = np.frombuffer(data, dtype=np.uint8)[base:int(offsets[-1])] if data is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1] - base
    lengths = np.diff(offsets)
    acc = np.zeros(n, dtype=np.uint64)
    if raw.size:
        pos = np.arange(raw.size, dtype=np.int64) - np.repeat(starts, lengths)
        with np.errstate(over="ignore"):
            terms = raw.astype(np.uint64) * _powers(int(lengths.max()))[pos]
        nonempty = lengths > 0
        acc[nonempty] = np.add.reduceat(terms, starts[nonempty])
    with np.errstate(over="ignore"):
        acc += lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
    return mix64(acc)


# --- text normalisation ---------------------------------------------------------------------------


NORMALIZE_CHOICES = ("nfkc", "lower", "whitespace", "punctuation", "digits")


def check_normalize(normalize: Sequence[str], where: str) -> None:
    bad = [n for n in normalize if n not in NORMALIZE_CHOICES]
    if bad:
        raise ConfigError(f"{where}: unknown normalisation {bad}; choose from {list(NORMALIZE_CHOICES)}")


def normalize_array(texts: pa.Array, normalize: Sequence[str]) -> pa.Array:
    """Apply the named normalisations, vectorised with Arrow kernels, in a fixed order whatever the order
    given: ``nfkc`` (Unicode NFKC), ``lower``, ``punctuation`` (Unicode punctuation and symbols become
    spaces), ``digits`` (every digit becomes 0), ``whitespace`` (runs collapsed to one space, ends
    stripped)."""
    import pyarrow.compute as pc

    if "nfkc" in normalize:
        texts = _nfkc(texts)
    if "lower" in normalize:
        texts = pc.utf8_lower(texts)
    if "punctuation" in normalize:
        texts = pc.replace_substring_regex(texts, r"[\p{P}\p{S}]", " ")
    if "digits" in normalize:
        texts = pc.replace_substring_regex(texts, r"\d", "0")
    if "whitespace" in normalize:
        texts = pc.utf8_trim_whitespace(pc.replace_substring_regex(texts, WHITESPACE_RUNS, " "))
    return texts


WHITESPACE_RUNS = r"[\s\p{Z}]{2,}|[^\S ]|[^\P{Z} ]"
r"""The runs of ``[\s\p{Z}]+`` that are not already one plain space: two or more whitespace characters, or one
that is not U+0020 (``\s`` or ``\p{Z}`` less the space). Replacing these by one space gives what replacing
every run does, without rewriting the space between every two words (five times faster)."""


def _nfkc(texts: pa.Array) -> pa.Array:
    """NFKC of the non-ASCII strings only (ASCII text is already in NFKC), segment by segment
    (:mod:`~tokenmill.curate.dedup.nfkc`)."""
    import pyarrow.compute as pc

    other = pc.invert(pc.string_is_ascii(texts))
    if not pc.any(other).as_py():
        return texts
    return pc.replace_with_mask(texts, other, nfkc(texts.filter(other)))


# --- shuffles -------------------------------------------------------------------------------------


PARTS = "parts.bin"
OFFSETS = "offsets"  # the partition offsets, stored as the file's first column
_MAGIC = b"TMPARTS1"
_ALIGN = 64


def write_partitioned(directory: Path, part: np.ndarray, parts: int, columns: dict[str, np.ndarray],
                      *, order: Sequence[np.ndarray] = ()) -> None:
    """Write ``columns`` sorted by ``part`` (then by ``order``, last key first as in ``np.lexsort``) into one
    file, ``directory/parts.bin`` (the module docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    idx = np.lexsort((*order, part)) if len(part) else np.zeros(0, dtype=np.int64)
    counts = np.bincount(part, minlength=parts) if len(part) else np.zeros(parts, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype("<i8")
    if OFFSETS in columns:
        raise ValueError(f"a shuffle column may not be named {OFFSETS!r}: the partition offsets are")
    arrays = {OFFSETS: offsets, **{name: np.ascontiguousarray(values[idx]) for name, values in columns.items()}}
    layout: dict[str, dict[str, Any]] = {}
    for name, values in arrays.items():
        if values.ndim != 1 or values.dtype.hasobject or values.dtype.names:
            raise ValueError(f"shuffle column {name!r}: a flat array of numbers is needed, got {values.dtype}{values.shape}")
        layout[name] = {"dtype": values.dtype.str, "rows": len(values)}
    header = b""
    for _ in range(2):  # the positions depend on the header's length, which depends on the positions
        at = _aligned(len(_MAGIC) + 8 + len(header))
        for name, values in arrays.items():
            layout[name]["at"] = at
            at = _aligned(at + values.nbytes)
        header = json.dumps(layout, separators=(",", ":")).encode()
    with open(directory / PARTS, "wb") as fh:
        fh.write(_MAGIC + len(header).to_bytes(8, "little") + header)
        for name, values in arrays.items():
            fh.write(b"\0" * (layout[name]["at"] - fh.tell()))
            fh.write(values.data.cast("B"))  # contiguous: made so above


def read_partition(directories: Sequence[Path], p: int, names: Sequence[str]) -> dict[str, np.ndarray]:
    """Partition ``p`` of every shuffle directory, concatenated in directory order (memory: that slice)."""
    pieces: dict[str, list[np.ndarray]] = {n: [] for n in names}
    with segments.Readers() as files:  # each segment opened once, whatever the number of units in it
        for d in directories:
            fh = files.open(d / PARTS)
            layout = _header(fh, d / PARTS)
            lo, hi = (int(x) for x in _rows(fh, layout[OFFSETS], p, p + 2))
            for n in names:
                pieces[n].append(_rows(fh, layout[n], lo, hi))
    return {n: (np.concatenate(v) if v else np.zeros(0)) for n, v in pieces.items()}


def read_column(directory: Path, name: str) -> np.ndarray:
    """One whole column of a shuffle directory, memory-mapped (read in pieces by whoever holds it)."""
    path = directory / PARTS
    with segments.open_slice(path) as fh:
        col = _header(fh, path)[name]
    if not col["rows"]:
        return np.zeros(0, dtype=np.dtype(col["dtype"]))
    return segments.memmap(path, np.dtype(col["dtype"]), col["at"], (col["rows"],))


def _header(fh: Any, path: Path) -> dict[str, Any]:
    start = fh.read(len(_MAGIC) + 8)
    if start[:len(_MAGIC)] != _MAGIC:
        raise ValueError(f"{path}: not a shuffle file (it does not start with {_MAGIC!r})")
    return json.loads(fh.read(int.from_bytes(start[len(_MAGIC):], "little")))


def _rows(fh: Any, col: dict[str, Any], lo: int, hi: int) -> np.ndarray:
    """Rows ``lo:hi`` of one column of an open shuffle file (one seek, one read)."""
    dtype = np.dtype(col["dtype"])
    fh.seek(col["at"] + lo * dtype.itemsize)
    return np.frombuffer(fh.read((hi - lo) * dtype.itemsize), dtype=dtype)


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def slice_rows(n_units: int, ids: np.ndarray) -> np.ndarray:
    """Offsets (``n_units + 1``) of each unit's rows in ``ids`` sorted by global id."""
    return np.searchsorted(ids, (np.arange(n_units + 1, dtype=np.int64) << ROW_BITS)).astype(np.int64)


# --- representatives ------------------------------------------------------------------------------


def check_keep(keep: str, where: str) -> None:
    if keep in ("first", "longest") or (keep.startswith("max:") and len(keep) > 4):
        return
    raise ConfigError(f"{where}: keep={keep!r} is not one of 'first', 'longest', 'max:<ledger column>'")


def priorities(keep: str, table: pa.Table, ledger: pa.Table | None) -> np.ndarray:
    """The survivor key of each row (lower wins; ties go to the earliest): 0, -length or -column value."""
    n = table.num_rows
    if keep == "first":
        return np.zeros(n, dtype=np.float64)
    if keep == "longest":
        import pyarrow.compute as pc

        return -pc.utf8_length(table.column("text")).to_numpy(zero_copy_only=False).astype(np.float64)
    col = keep[4:]
    if ledger is None or col not in ledger.column_names:
        raise ConfigError(f"keep={keep!r}: the upstream ledger has no column {col!r}")
    values = dict(zip(ledger.column("id").to_pylist(), ledger.column(col).to_pylist()))
    out = np.array([values.get(i) for i in table.column("id").to_pylist()], dtype=np.float64)
    return -np.nan_to_num(out, nan=-np.inf)


def read_docs(out: Path, part: DocsPart) -> pa.Table:
    return pq.read_table(segments.arrow_source(out / part.docs))


def read_ledger(out: Path, part: DocsPart) -> pa.Table | None:
    return pq.read_table(segments.arrow_source(out / part.ledger)) if part.ledger else None


# --- the documents stage that ends a step ---------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What a step decided for one unit's rows: the rewritten text (modifiers), the ledger columns, and
    the reason each row is removed (``None`` = kept)."""

    columns: dict[str, np.ndarray]
    reasons: list[str | None]
    text: pa.Array | None = None
    extra: dict[str, int] | None = None


def write_documents(out_dir: Path, step_name: str, part: DocsPart, table: pa.Table, decision: Decision,
                    *, extra_stats: dict[str, int] | None = None) -> UnitResult:
    """Write the survivors and the ledger part of one unit; return the documents-stage result."""
    if decision.text is not None:
        table = table.set_column(table.column_names.index("text"), "text",
                                 decision.text.cast(table.schema.field("text").type))
    kept = np.array([r is None for r in decision.reasons], dtype=bool)
    docs_rel = f"steps/{step_name}/docs/{part.name}.parquet"
    ledger_rel = f"steps/{step_name}/ledger/{part.name}.parquet"
    for rel in (docs_rel, ledger_rel):
        (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
    survivors = table.filter(pa.array(kept))
    pq.write_table(survivors, out_dir / docs_rel)
    ledger = provenance(table)
    ledger.update({k: pa.array(v) for k, v in decision.columns.items()})
    ledger["kept"] = pa.array(kept)
    ledger["reason"] = pa.array(decision.reasons, type=pa.string())
    pq.write_table(pa.table(ledger), out_dir / ledger_rel)
    stats = Stats(input=table.num_rows, kept=int(kept.sum()))
    for r in decision.reasons:
        if r is not None:
            stats.filter(r)
    stats.extra.update(extra_stats or {})
    return UnitResult(stats=stats, outputs=[docs_rel, ledger_rel],
                      data=as_data(Documents(docs_rel, ledger_rel, part.name, rows=survivors.num_rows,
                                             size=(out_dir / docs_rel).stat().st_size)))


def provenance(table: pa.Table) -> dict[str, pa.ChunkedArray]:
    """The ledger's identity columns of a documents table: ``id``, ``source`` and, where the documents carry
    it, ``loc`` (the input line or row), by which the funnel follows a document from stage to stage."""
    cols = {"id": table.column("id"), "source": table.column("source")}
    if "loc" in table.column_names:
        cols["loc"] = table.column("loc")
    return cols


def units_of(parts: Sequence[DocsPart]) -> list[Unit]:
    """The units of a per-input-unit stage: same indices and names as the upstream documents stage."""
    return [Unit(p.index, p.name, size=p.rows, payload=p) for p in parts]


def stage_params(step: Step, **extra: Any) -> dict[str, Any]:
    return {"step": step.name, "version": step.version, **step_params(step), **extra}


Planner = Callable[[StageContext], Any]
