"""One format's full scan and random reads, run alone in a fresh process: ``python -m tokenmill.bench.scan``.

Arguments: FORMAT PATH ROWS (ROWS a JSON list of row numbers to read at random). Prints one JSON object:
``scan_s``, ``first_batch_s``, ``docs``, ``chars``, ``peak_rss_mb`` (``ru_maxrss`` growth after imports),
``read_ms`` (one entry per random read).

Peak RSS is the growth of the process's high-water mark over its resident size after imports. On Linux the
mark is reset after imports (``/proc/self/clear_refs``) and read from ``VmHWM``: ``ru_maxrss`` would not
do, since it carries the parent's peak across ``exec``. Elsewhere ``ru_maxrss`` is used.

A scan reads every document's text into memory in batches of 1,024 documents: Python strings for JSONL
(parsed with orjson), Arrow arrays for Parquet and Arrow IPC, whose bytes are then read once by counting
UTF-8 characters (``pyarrow.compute.utf8_length``) so a memory-mapped file is really read.
"""

from __future__ import annotations

import io
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import zstandard

BATCH = 1024


def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def reset_peak() -> float:
    """Reset the high-water mark where the OS allows; return the baseline to subtract from :func:`peak_mb`."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_mb("VmRSS") or 0.0
    except OSError:
        return peak_mb()


def peak_mb() -> float:
    hwm = _status_mb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _json_batches(stream) -> Iterator[tuple[int, int]]:
    lines: list[bytes] = []
    for line in stream:
        lines.append(line)
        if len(lines) == BATCH:
            yield _json_chars(lines)
            lines = []
    if lines:
        yield _json_chars(lines)


def _json_chars(lines: list[bytes]) -> tuple[int, int]:
    texts = [orjson.loads(line)["text"] for line in lines]
    return len(texts), sum(len(t) for t in texts)


def _arrow_chars(column: pa.Array) -> int:
    return int(pc.sum(pc.utf8_length(column)).as_py() or 0)


def scan_jsonl(path: str) -> Iterator[tuple[int, int]]:
    with open(path, "rb") as f:
        yield from _json_batches(f)


def scan_jsonl_zst(path: str) -> Iterator[tuple[int, int]]:
    with open(path, "rb") as raw:
        stream = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw), 1 << 20)
        yield from _json_batches(stream)


def scan_parquet(path: str) -> Iterator[tuple[int, int]]:
    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH, columns=["text"]):
        yield batch.num_rows, _arrow_chars(batch.column(0))


def scan_arrow(path: str) -> Iterator[tuple[int, int]]:
    reader = pa.ipc.open_file(pa.memory_map(path))
    for i in range(reader.num_record_batches):
        batch = reader.get_batch(i)
        yield batch.num_rows, _arrow_chars(batch.column("text"))


def read_jsonl(path: str, row: int, index: np.ndarray) -> str:
    """Seek to the row's byte offset from the line index, read one line."""
    with open(path, "rb") as f:
        f.seek(int(index[row]))
        return orjson.loads(f.readline())["text"]


def read_jsonl_zst(path: str, row: int, index: np.ndarray) -> str:
    """A zstd stream has no random access: decompress from the start up to the row."""
    with open(path, "rb") as raw:
        stream = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw), 1 << 20)
        for i, line in enumerate(stream):
            if i == row:
                return orjson.loads(line)["text"]
    raise IndexError(row)


def read_parquet(path: str, row: int, index: np.ndarray) -> str:
    """Open the file (footer), read the one row group holding the row, take the row."""
    pf = pq.ParquetFile(path)
    starts = np.cumsum([0] + [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)])
    group = int(np.searchsorted(starts, row, side="right") - 1)
    table = pf.read_row_group(group, columns=["text"])
    return table.column(0)[row - int(starts[group])].as_py()


def read_arrow(path: str, row: int, index: np.ndarray) -> str:
    """Memory-map the file, take the row by slicing (zero copy)."""
    table = pa.ipc.open_file(pa.memory_map(path)).read_all()
    return table.column("text")[row].as_py()


SCANS: dict[str, Callable] = {
    "jsonl": scan_jsonl, "jsonl.zst": scan_jsonl_zst, "parquet": scan_parquet, "arrow": scan_arrow,
}
READS: dict[str, Callable] = {
    "jsonl": read_jsonl, "jsonl.zst": read_jsonl_zst, "parquet": read_parquet, "arrow": read_arrow,
}


def measure(kind: str, path: str, rows: list[int], index_path: str = "") -> dict:
    base = reset_peak()
    start = time.perf_counter()
    first, docs, chars = 0.0, 0, 0
    for n, c in SCANS[kind](path):
        if not docs:
            first = time.perf_counter() - start
        docs, chars = docs + n, chars + c
    scan_s = time.perf_counter() - start
    peak = peak_mb() - base
    index = np.load(index_path) if index_path else np.zeros(0, dtype=np.int64)
    read_ms = []
    for row in rows:
        t = time.perf_counter()
        READS[kind](path, row, index)
        read_ms.append((time.perf_counter() - t) * 1000)
    return {"scan_s": scan_s, "first_batch_s": first, "docs": docs, "chars": chars,
            "peak_rss_mb": peak, "read_ms": read_ms}


def main(argv: list[str]) -> int:
    kind, path, rows = argv[0], argv[1], json.loads(argv[2])
    index_path = argv[3] if len(argv) > 3 else ""
    print(json.dumps(measure(kind, path, rows, index_path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
