"""Peak memory of streaming reads: ~100 MB vs ~1 GB of JSONL and of Parquet.

Generates the files in a temporary directory, then reads each one in a fresh process with
``read_unit`` over all its work units and reports that process's peak RSS (``getrusage``), so the
numbers do not include generation. Flat peak RSS from 100 MB to 1 GB means bounded memory.

    python benchmarks/read_rss.py [--sizes-mb 100 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DOC_CHARS = 1000


def _word_pool(n_chars: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    words = ["".join(chr(c) for c in letters[rng.integers(0, 26, rng.integers(2, 10))]) for _ in range(20000)]
    picks = rng.integers(0, len(words), n_chars // 5)
    return " ".join(words[i] for i in picks)[:n_chars]


def _docs(pool: str, n: int, start: int, rng: np.random.Generator) -> list[str]:
    offsets = rng.integers(0, len(pool) - 2 * DOC_CHARS, n)
    lengths = rng.integers(DOC_CHARS // 2, DOC_CHARS * 3 // 2, n)
    return [pool[o : o + ln] for o, ln in zip(offsets, lengths)]


def make_jsonl(path: Path, target_bytes: int, pool: str) -> None:
    rng, i, written = np.random.default_rng(1), 0, 0
    with open(path, "wb") as fh:
        while written < target_bytes:
            lines = [f'{{"id": {i + k}, "text": "{d}"}}\n'.encode() for k, d in enumerate(_docs(pool, 2000, i, rng))]
            block = b"".join(lines)
            fh.write(block)
            written += len(block)
            i += len(lines)


def make_parquet(path: Path, target_bytes: int, pool: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng, i = np.random.default_rng(2), 0
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    with pq.ParquetWriter(path, schema, compression="snappy") as writer:
        while not path.exists() or path.stat().st_size < target_bytes:
            docs = _docs(pool, 20000, i, rng)
            writer.write_table(pa.table({"id": np.arange(i, i + len(docs)), "text": docs}, schema=schema))
            i += len(docs)


def peak_rss_mb() -> int:
    """This process's peak RSS since it started (VmHWM, which, unlike ru_maxrss, forgets the parent's)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def read_child(path: str) -> None:
    """Read every unit of ``path``; print one JSON line with rows, seconds and peak RSS."""
    from tokenmill.io import expand_inputs, plan_units, read_unit

    base = peak_rss_mb()
    files = expand_inputs([path])
    units = plan_units(files)
    t0, rows, nbytes = time.perf_counter(), 0, 0
    for unit in units:
        for batch in read_unit(unit):
            rows += len(batch)
            nbytes += batch.nbytes
    peak = peak_rss_mb()
    print(
        json.dumps(
            {
                "units": len(units),
                "rows": rows,
                "seconds": round(time.perf_counter() - t0, 2),
                "base_rss_mb": base,
                "peak_rss_mb": peak,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--keep", help="write the files here instead of a temporary directory")
    ap.add_argument("--read", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.read:
        read_child(args.read)
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        pool = _word_pool(8 << 20)
        print(
            f"{'file':<16} {'size MB':>8} {'units':>6} {'rows':>9} {'s':>6} {'MB/s':>6} {'base RSS':>9} {'peak RSS':>9}"
        )
        for mb in args.sizes_mb:
            for kind, make in (("jsonl", make_jsonl), ("parquet", make_parquet)):
                path = out / f"docs-{mb}mb.{kind}"
                make(path, mb << 20, pool)
                res = json.loads(
                    subprocess.run(
                        [sys.executable, __file__, "--read", str(path)], check=True, capture_output=True, text=True
                    ).stdout
                )
                size = path.stat().st_size / (1 << 20)
                print(
                    f"{path.name:<16} {size:>8.0f} {res['units']:>6} {res['rows']:>9} {res['seconds']:>6} "
                    f"{size / max(res['seconds'], 1e-9):>6.0f} {res['base_rss_mb']:>7}MB {res['peak_rss_mb']:>7}MB"
                )
                path.unlink()


if __name__ == "__main__":
    main()
