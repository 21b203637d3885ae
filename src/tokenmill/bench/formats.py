"""``tokenmill bench formats``: the same documents stored five ways, measured.

For each format: size on disk, write time (median of three, from Python lists of ids and texts, to the
page cache, no fsync), full-scan throughput (MB of UTF-8 text per second through the reader, warm page cache), peak RSS
of the scan, time to the first batch of 1,024 documents, and the median time to read one record at random.
Every scan and its random reads run in a fresh process (``tokenmill.bench.scan``), so peaks do not mix;
peak RSS is that process's high-water mark minus its resident size after imports. Each format is scanned
in three fresh processes; the run with the median scan time is reported.

Random access, per format: JSONL seeks to the record's byte offset in a line index (8 bytes per record,
built while writing, loaded once before the reads); JSONL.zst has no index and decompresses from the
start; Parquet opens the footer and reads the one row group holding the row (row groups of 1,000 records);
Arrow IPC memory-maps the file and slices the row.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from tokenmill.bench.corpus import MB, generated_texts, read_texts, resample
from tokenmill.errors import TokenmillError

ROWS_PER_GROUP = 1000
RANDOM_READS = 7
SCANS = 3
SCHEMA = pa.schema([pa.field("id", pa.string()), pa.field("text", pa.large_string())])


@dataclass(frozen=True)
class Format:
    name: str  # row label
    suffix: str
    kind: str  # scanner in tokenmill.bench.scan
    write: Callable[[Path, list[str], list[str]], None]


def _jsonl_lines(ids: list[str], texts: list[str], index: list[int]):
    at = 0
    for i in range(0, len(texts), ROWS_PER_GROUP):
        pairs = zip(ids[i:i + ROWS_PER_GROUP], texts[i:i + ROWS_PER_GROUP])
        chunk = [orjson.dumps({"id": d, "text": t}) + b"\n" for d, t in pairs]
        for line in chunk:
            index.append(at)
            at += len(line)
        yield b"".join(chunk)


def write_jsonl(path: Path, ids: list[str], texts: list[str]) -> None:
    index: list[int] = []
    with open(path, "wb") as f:
        f.writelines(_jsonl_lines(ids, texts, index))
    np.save(str(path) + ".idx.npy", np.array(index, dtype=np.int64))


def write_jsonl_zst(path: Path, ids: list[str], texts: list[str]) -> None:
    with open(path, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as f:
        for block in _jsonl_lines(ids, texts, []):
            f.write(block)


def _parquet_writer(compression: str) -> Callable[[Path, list[str], list[str]], None]:
    def write(path: Path, ids: list[str], texts: list[str]) -> None:
        table = pa.table({"id": ids, "text": texts}, schema=SCHEMA)
        pq.write_table(table, path, compression=compression, row_group_size=ROWS_PER_GROUP)

    return write


def write_arrow(path: Path, ids: list[str], texts: list[str]) -> None:
    table = pa.table({"id": ids, "text": texts}, schema=SCHEMA)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
        writer.write_table(table, max_chunksize=ROWS_PER_GROUP)


FORMATS = (
    Format("JSONL", "jsonl", "jsonl", write_jsonl),
    Format("JSONL.zst (level 3)", "jsonl.zst", "jsonl.zst", write_jsonl_zst),
    Format("Parquet (snappy)", "snappy.parquet", "parquet", _parquet_writer("snappy")),
    Format("Parquet (zstd)", "zstd.parquet", "parquet", _parquet_writer("zstd")),
    Format("Arrow IPC (uncompressed)", "arrow", "arrow", write_arrow),
)


def corpus_texts(inputs: list[str], *, mb: float, seed: int = 0) -> tuple[list[str], str]:
    """The benchmark documents and a one-line description of where they come from."""
    if not inputs:
        return generated_texts(mb=mb, seed=seed), "generated pseudo-text (no repeats)"
    texts = read_texts(inputs)
    unique = sum(len(t.encode("utf-8")) for t in texts) / MB
    return resample(texts, mb=mb, seed=seed), (
        f"{len(texts):,} documents ({unique:.1f} MB) from {', '.join(inputs)}, resampled with replacement"
    )


def bench_formats(inputs: list[str], *, mb: float = 50.0, workdir: str | None = None) -> str:
    """Measure every storage format on about ``mb`` MB of documents; return a Markdown table."""
    texts, origin = corpus_texts(list(inputs), mb=mb)
    ids = [f"doc-{i:09d}" for i in range(len(texts))]
    text_mb = sum(len(t.encode("utf-8")) for t in texts) / MB
    rows = sorted(np.random.default_rng(1).integers(0, len(texts), size=RANDOM_READS).tolist())
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        results = [_measure(fmt, Path(tmp), ids, texts, rows, text_mb) for fmt in FORMATS]
    header = (f"Corpus: {len(texts):,} documents, {text_mb:.1f} MB of UTF-8 text; {origin}. "
              f"{_machine()}.\n\n")
    return header + render_table(results)


def _measure(fmt: Format, workdir: Path, ids: list[str], texts: list[str], rows: list[int], text_mb: float) -> dict:
    path = workdir / f"corpus.{fmt.suffix}"
    write_s = statistics.median(_timed_write(fmt, path, ids, texts) for _ in range(SCANS))
    index = str(path) + ".idx.npy"
    runs = [_scan_in_subprocess(fmt.kind, path, rows, index if os.path.exists(index) else "") for _ in range(SCANS)]
    scan = sorted(runs, key=lambda r: r["scan_s"])[len(runs) // 2]
    if scan["docs"] != len(texts):
        raise TokenmillError(f"{fmt.name}: the scan of {path} returned {scan['docs']} documents, "
                             f"{len(texts)} were written; the reader or writer for this format is broken")
    return {
        "format": fmt.name, "disk_mb": path.stat().st_size / MB, "text_mb": text_mb, "write_s": write_s,
        "scan_mb_s": text_mb / scan["scan_s"], "peak_rss_mb": scan["peak_rss_mb"],
        "first_batch_ms": scan["first_batch_s"] * 1000, "read_ms": statistics.median(scan["read_ms"]),
    }


def _timed_write(fmt: Format, path: Path, ids: list[str], texts: list[str]) -> float:
    start = time.perf_counter()
    fmt.write(path, ids, texts)
    return time.perf_counter() - start


def _scan_in_subprocess(kind: str, path: Path, rows: list[int], index: str) -> dict:
    cmd = [sys.executable, "-m", "tokenmill.bench.scan", kind, str(path), json.dumps(rows)]
    done = subprocess.run(cmd + ([index] if index else []), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TokenmillError(f"the scan of {path} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def render_table(results: list[dict]) -> str:
    lines = [
        "| format | disk MB | disk / text | write s | scan MB/s | scan peak RSS MB | first batch ms | random read ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['format']} | {r['disk_mb']:.1f} | {r['disk_mb'] / r['text_mb']:.2f} | {r['write_s']:.2f} "
            f"| {r['scan_mb_s']:.0f} | {r['peak_rss_mb']:.1f} | {r['first_batch_ms']:.1f} | {r['read_ms']:.2f} |"
        )
    return "\n".join(lines)


def _machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"Machine: {os.cpu_count()} CPUs{', ' + model if model else ''}"
