"""Curation heuristics: tokenmill's Gopher + C4 + FineWeb cascade against datatrove's same filters, in one run.

    python benchmarks/curation_heuristics.py [--mb 100] [--datatrove-docs 400] [--shared ../shared/data]

1. Corpus: the real web documents of ``SHARED/pretrain`` (Dolma CC, the DCLM agreement pages, C4) and
   ``SHARED/curation/cc_text`` (1,308 documents, 4.3 MB), drawn with replacement in a seeded order until
   ``--mb`` MB of UTF-8 text, written as one Parquet file (row groups of 1,024) under ``benchmarks/_work/``.
2. tokenmill, in its own process, one core: batches of 1,024 documents read from the Parquet file, every
   document scored by ``gopher_repetition``, ``gopher_quality``, ``c4`` (its rewritten text goes on) and
   ``fineweb`` in FineWeb's order, each step deciding; the first removing rule is kept per document. Every
   step scores every document (as the ledger does), which is more work than a cascade that stops early.
3. datatrove, in its own process, one core: the first ``--datatrove-docs`` documents of the same corpus as
   ``Document`` objects through ``GopherRepetitionFilter``, ``GopherQualityFilter``, ``C4QualityFilter``,
   ``FineWebQualityFilter`` (defaults: spaCy's English word tokenizer), each document stopping at the first
   filter that removes it; the filters are called directly (no executor, no reader or writer overhead).
   datatrove takes minutes per thousand documents here, so it gets a smaller sample of the same corpus and
   both are compared per document.
4. Documents per second per core from CPU seconds (user + system) of the timed part, wall seconds beside;
   peak RSS of each process from outside (psutil, every 200 ms); the share of the datatrove sample on which
   both keep or both remove.

Prints the table and rewrites the section of BENCHMARKS.md (``--no-write`` to skip).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from common import REPO, machine, run_measured, update_section

HERE = Path(__file__).resolve().parent
HEADING = "Curation heuristics: tokenmill vs datatrove"
WEB = ["pretrain/dolma_cc_en_head-0091.jsonl", "pretrain/dolma_cc_en_head-0174.jsonl",
       "pretrain/dclm_quality_agreement_data.jsonl", "pretrain/llamafactory_c4_demo.jsonl",
       "pretrain/dolma_provided_documents_000.json.gz",
       "curation/cc_text/dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"]
ORDER = ["gopher_repetition", "gopher_quality", "c4", "fineweb"]
BATCH = 1024


def web_texts(shared: Path) -> list[str]:
    texts = []
    for name in WEB:
        path = shared / name
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            texts.extend(json.loads(line)["text"] for line in fh if line.strip())
    return texts


def build_corpus(shared: Path, work: Path, *, mb: float, seed: int) -> dict:
    out = work / f"web_{mb:g}mb_seed{seed}.parquet"
    texts = web_texts(shared)
    sizes = np.array([len(t.encode()) for t in texts])
    if not out.exists():
        rng = np.random.default_rng(seed)
        picks, total = [], 0
        while total < mb * 1e6:
            i = int(rng.integers(len(texts)))
            picks.append(i)
            total += int(sizes[i])
        table = pa.table({"id": [str(k) for k in range(len(picks))],
                          "text": pa.array([texts[i] for i in picks], pa.large_string())})
        work.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out, row_group_size=BATCH)
    meta = pq.ParquetFile(out).metadata
    return {"path": str(out), "docs": meta.num_rows, "unique_docs": len(texts),
            "unique_mb": float(sizes.sum() / 1e6)}


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_tokenmill(corpus: str) -> dict:
    sys.path.insert(0, str(REPO / "src"))
    from tokenmill.steps.registry import step_class

    steps = [step_class(name)() for name in ORDER]
    pf = pq.ParquetFile(corpus)
    step_cpu = dict.fromkeys(ORDER, 0.0)
    docs = nbytes = 0
    removed: list[bool] = []
    start_wall, start_cpu = time.perf_counter(), cpu_seconds()
    for batch in pf.iter_batches(batch_size=BATCH, columns=["id", "text"]):
        first = np.full(batch.num_rows, None, dtype=object)
        for step in steps:
            t = cpu_seconds()
            scored = step.score(batch)
            rules = step.decide(scored.scores)
            step_cpu[step.name] += cpu_seconds() - t
            first = np.where(first == None, rules, first)  # noqa: E711 (element-wise)
            if scored.text is not None:
                batch = batch.set_column(batch.schema.get_field_index("text"), "text", scored.text)
        docs += batch.num_rows
        nbytes += sum(b.size for b in batch.column("text").buffers() if b is not None)
        removed.extend(r is not None for r in first)
    return {"docs": docs, "wall_s": time.perf_counter() - start_wall, "cpu_s": cpu_seconds() - start_cpu,
            "step_cpu_s": step_cpu, "removed": removed[:20000]}


def run_datatrove(corpus: str, n: int) -> dict:
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    texts = pq.read_table(corpus, columns=["text"]).column("text").to_pylist()[:n]
    filters = [GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter()]
    filters[1].filter(Document(text="warm up the word tokenizer", id="w"))  # spaCy loads: not timed
    removed = []
    start_wall, start_cpu = time.perf_counter(), cpu_seconds()
    for i, text in enumerate(texts):
        doc = Document(text=text, id=str(i))
        removed.append(any(f.filter(doc) is not True for f in filters))  # any() stops at the first removal
    return {"docs": len(texts), "wall_s": time.perf_counter() - start_wall, "cpu_s": cpu_seconds() - start_cpu,
            "removed": removed}


def measure(which: str, corpus: str, n: int) -> dict:
    out = Path(corpus).with_name(f"result_{which}.json")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run", which, "--corpus", corpus, "--n", str(n),
           "--out", str(out)]
    done = run_measured(cmd, poll_s=0.2, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    if done["rc"] != 0:
        raise SystemExit(f"{which} failed:\n{done['stderr'][-3000:]}")
    result = json.loads(out.read_text())
    result["peak_rss_mb"] = done["peak_rss_mb"]
    return result


def report(corpus: dict, mb: float, tm: dict, dt: dict, load: float) -> str:
    n = min(dt["docs"], len(tm["removed"]))
    agree = sum(a == b for a, b in zip(tm["removed"][:n], dt["removed"][:n])) / n
    tm_rate, dt_rate = tm["docs"] / tm["cpu_s"], dt["docs"] / dt["cpu_s"]
    steps = ", ".join(f"{k} {v:.1f} s" for k, v in tm["step_cpu_s"].items())
    rows = [
        "| pipeline | documents | CPU s | wall s | documents/s per core (CPU) | documents/s (wall) | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| tokenmill steps (batches of {BATCH}, one process) | {tm['docs']:,} | {tm['cpu_s']:.1f} | "
        f"{tm['wall_s']:.1f} | {tm_rate:,.0f} | {tm['docs'] / tm['wall_s']:,.0f} | {tm['peak_rss_mb']:.0f} |",
        f"| datatrove filters (spaCy words, one process) | {dt['docs']:,} | {dt['cpu_s']:.1f} | {dt['wall_s']:.1f} | "
        f"{dt_rate:,.1f} | {dt['docs'] / dt['wall_s']:,.1f} | {dt['peak_rss_mb']:.0f} |",
    ]
    return "\n".join([
        f"Corpus: {corpus['docs']:,} documents, {mb:g} MB of UTF-8 text: the {corpus['unique_docs']:,} real web "
        f"documents ({corpus['unique_mb']:.1f} MB) of `pretrain/` (Dolma CC, DCLM agreement pages, C4) and "
        f"`curation/cc_text/`, resampled with replacement (seed 0). datatrove ran on the first {dt['docs']:,} "
        f"of them (minutes per thousand documents here); rates are per document. Machine: {machine()}; "
        f"1-min load average {load:.1f} when the run began (the machine is shared: CPU seconds are the measure).",
        "",
        "Cascade, in FineWeb's order: Gopher repetition, Gopher quality, C4 (line rules rewrite the text), FineWeb.",
        "",
        *rows,
        "",
        f"tokenmill / datatrove: **{tm_rate / dt_rate:,.0f}x** documents per CPU second (target >= 10x). "
        f"Same keep/remove decision on {agree:.1%} of the {n:,} documents both processed.",
        "",
        f"tokenmill CPU seconds by step: {steps}. Every tokenmill step scores every document (the ledger keeps "
        "every statistic); datatrove stops at the first filter that removes a document. The one Python loop "
        "in tokenmill's steps, the greedy scan of duplicated 5..10-grams, visits only the positions whose "
        "n-gram occurred before; its cost is inside gopher_repetition's figure.",
        "",
        "Reproduce: `python benchmarks/curation_heuristics.py --mb 100 --datatrove-docs 400`.",
    ])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--datatrove-docs", type=int, default=400)
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--work", type=Path, default=HERE / "_work")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--run", choices=["tokenmill", "datatrove"], help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run:
        result = run_tokenmill(args.corpus) if args.run == "tokenmill" else run_datatrove(args.corpus, args.n)
        Path(args.out).write_text(json.dumps(result))
        return 0
    load = os.getloadavg()[0]
    corpus = build_corpus(args.shared, args.work, mb=args.mb, seed=0)
    tm = measure("tokenmill", corpus["path"], 0)
    dt = measure("datatrove", corpus["path"], args.datatrove_docs)
    body = report(corpus, args.mb, tm, dt, load)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
