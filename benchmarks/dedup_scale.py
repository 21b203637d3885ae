"""Dedup throughput in GB of text per core-hour: MinHash end to end and exact dedup, tokenmill vs datatrove.

    python benchmarks/dedup_scale.py [--mb 500] [--exact-mb 250 500] [--workers 2] [--workdir DIR] [--no-write]

Input. ``crawl_corpus.write_corpus``: the real web pages of ``shared/data`` resampled to ``--mb`` MB with
fresh edits (10% exact copies, 10% near-copies), split into JSONL files of about ``--file-mb`` MB (the work
units of both tools).

Runs, each a fresh process tree, one after the other, ``--workers`` each:

- tokenmill MinHash at datatrove's parameters (5-grams, 14 bands x 8 rows, no exact-Jaccard check): the
  JSONL source stage, signatures, buckets, components, the filter (documents and ledger written);
- datatrove's four MinHash stages at its defaults (``MinhashConfig()``: 5-grams, 14 x 8), reading the same
  JSONL and writing the kept and removed documents;
- tokenmill MinHash at its own defaults (20 x 7, candidates verified at Jaccard 0.8);
- tokenmill exact dedup (source stage, hash, groups, filter) at ``--exact-mb`` sizes.

CPU: user + system seconds of every process of the run's tree, polled every 0.25 s, each process's last
reading (:func:`run_measured`; a process's last quarter second can be missed). GB per core-hour = input GB
/ (CPU seconds / 3600): on a shared machine CPU seconds are what a run costs, where wall seconds depend on
the other jobs. Peak memory: the process tree, polled (RSS summed over processes, and PSS, which counts a
shared page once) and the largest single process. Per-stage CPU seconds of tokenmill from its unit results
(the worker's CPU time while it ran each unit).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from common import machine, update_section

MB = 1_000_000


def build_input(out: Path, mb: float, file_mb: float, shared: Path) -> dict:
    """``mb`` MB of edited crawl text as JSONL files of about ``file_mb`` MB each."""
    from crawl_corpus import write_corpus

    out.mkdir(parents=True, exist_ok=True)
    whole = out.with_suffix(".jsonl")
    info = write_corpus(whole, shared=shared, mb=mb)
    k, size, fh = 0, 0, open(out / "part-00000.jsonl", "w", encoding="utf-8")
    with open(whole, encoding="utf-8") as src:
        for line in src:
            if size >= file_mb * MB:
                fh.close()
                k, size = k + 1, 0
                fh = open(out / f"part-{k:05d}.jsonl", "w", encoding="utf-8")
            fh.write(line)
            size += len(line.encode("utf-8"))
    fh.close()
    whole.unlink()
    return {**info, "files": k + 1}


# --- children -------------------------------------------------------------------------------------


def run_measured(cmd: list[str], *, poll_s: float) -> dict:
    """:func:`common.run_measured` plus the CPU seconds of the tree and its largest process's RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(proc.pid)
    cpu: dict[int, float] = {}
    peak_rss = peak_pss = peak_one = 0
    while proc.poll() is None:
        rss = pss = 0
        try:
            procs = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            procs = []
        for p in procs:
            try:
                with p.oneshot():
                    t, info = p.cpu_times(), p.memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            cpu[p.pid] = max(cpu.get(p.pid, 0.0), t.user + t.system)
            rss, pss, peak_one = rss + info.rss, pss + getattr(info, "pss", info.rss), max(peak_one, info.rss)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(poll_s)
    out, err = proc.communicate()
    return {"stdout": out, "stderr": err, "rc": proc.returncode, "wall_s": time.perf_counter() - start,
            "cpu_s": sum(cpu.values()), "peak_rss_mb": peak_rss / 2**20, "peak_pss_mb": peak_pss / 2**20,
            "peak_process_rss_mb": peak_one / 2**20}


def _tokenmill(args: argparse.Namespace) -> dict:
    import pyarrow.parquet as pq

    from bench_dedup_source import jsonl_source_stage
    from tokenmill.curate.dedup.exact import ExactDedup
    from tokenmill.curate.dedup.minhash import MinHashDedup
    from tokenmill.engine import LocalExecutor, run_workflow

    params = json.loads(args.params)
    step = ExactDedup(**params) if args.which == "_exact" else MinHashDedup(**params)
    files = sorted(str(p) for p in Path(args.corpus).glob("*.jsonl"))
    start = time.perf_counter()
    res = run_workflow([jsonl_source_stage(files), *step.stages("source")], out=args.work, fingerprint="bench",
                       executor=LocalExecutor(workers=args.workers))
    seconds = time.perf_counter() - start
    removed = sum(pq.read_metadata(Path(args.work) / r.data["ledger"]).num_rows - r.data["rows"]
                  for r in res[step.name])
    return {"seconds": seconds, "removed": removed, "graph": _graph(step.name, res),
            "busy_s": {name: round(sum(r.seconds for r in rs), 2) for name, rs in res.items()},
            "cpu_by_stage": {name: round(sum(r.cpu_seconds for r in rs), 2) for name, rs in res.items()},
            "stage_peak_rss_mb": {name: round(max((r.peak_rss_mb for r in rs), default=0.0), 1)
                                  for name, rs in res.items()}}


def _graph(name: str, res: dict) -> dict:
    """MinHash's candidate graph: edges out of the buckets (and kept by the check), the components stage's
    partitions and Large-Star / Small-Star steps."""
    if f"{name}.components" not in res:
        return {}
    comp = res[f"{name}.components"][0].data
    graph = {"edges": sum(r.data["edges"] for r in res[f"{name}.buckets"]),
             "partitions": comp.get("partitions", 1), "steps": comp["rounds"]}
    if f"{name}.verify" in res:
        graph["verified"] = sum(r.data["verified"] for r in res[f"{name}.verify"])
    return graph


def _datatrove(args: argparse.Namespace) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter

    from bench_dedup_source import xxhash64_str

    work, cfg, w = Path(args.work), MinhashConfig(), args.workers
    tasks = len(list(Path(args.corpus).glob("*.jsonl")))
    start = time.perf_counter()
    signature = MinhashDedupSignature(str(work / "sigs"), config=cfg)
    signature._hash_func = xxhash64_str  # the installed xxhash takes bytes only; same hash, same speed
    s1 = LocalPipelineExecutor(pipeline=[JsonlReader(args.corpus), signature],
                               tasks=tasks, workers=w, logging_dir=str(work / "log1"))
    s2 = LocalPipelineExecutor(pipeline=[MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=cfg)],
                               tasks=cfg.num_buckets, workers=w, logging_dir=str(work / "log2"), depends=s1)
    s3 = LocalPipelineExecutor(pipeline=[MinhashDedupCluster(str(work / "buckets"), str(work / "ids"), config=cfg)],
                               tasks=1, logging_dir=str(work / "log3"), depends=s2)
    s4 = LocalPipelineExecutor(pipeline=[JsonlReader(args.corpus),
                                         MinhashDedupFilter(str(work / "ids"),
                                                            exclusion_writer=JsonlWriter(str(work / "removed"),
                                                                                         compression=None)),
                                         JsonlWriter(str(work / "kept"), compression=None)],
                               tasks=tasks, workers=w, logging_dir=str(work / "log4"), depends=s3)
    s4.run()
    seconds = time.perf_counter() - start
    removed = sum(sum(1 for _ in open(f, encoding="utf-8")) for f in (work / "removed").glob("*.jsonl"))
    return {"seconds": seconds, "removed": removed}


def measured(which: str, corpus: Path, work: Path, *, workers: int, params: dict | None = None) -> dict:
    result = work.with_name(work.name + ".json")
    cmd = [sys.executable, __file__, f"_{which}", "--corpus", str(corpus), "--work", str(work),
           "--workers", str(workers), "--params", json.dumps(params or {}), "--result", str(result)]
    m = run_measured(cmd, poll_s=0.25)
    if m["rc"] != 0:
        raise RuntimeError(f"{which} failed:\n{m['stderr'][-3000:]}")
    out = json.loads(result.read_text())
    out.update({"wall_s": m["wall_s"], "cpu_s": m["cpu_s"], "peak_rss_mb": m["peak_rss_mb"],
                "peak_pss_mb": m["peak_pss_mb"], "peak_process_rss_mb": m["peak_process_rss_mb"]})
    shutil.rmtree(work, ignore_errors=True)
    return out


# --- report ---------------------------------------------------------------------------------------


def per_core_hour(gb: float, r: dict) -> float:
    return gb / (r["cpu_s"] / 3600)


def report(runs: dict, sizes: dict, args: argparse.Namespace, load: tuple[float, float]) -> str:
    labels = {"tokenmill_equal": "tokenmill MinHash at datatrove's parameters (14x8, no verification)",
              "datatrove": "datatrove MinHash, 4 stages, defaults (5-grams, 14x8)",
              "tokenmill_default": "tokenmill MinHash at its defaults (20x7, verified at J >= 0.8)"}
    rows = []
    for name, r in runs.items():
        gb = sizes[r["mb"]]["bytes"] / 1e9
        label = labels.get(name) or f"tokenmill exact dedup, {r['mb']:.0f} MB"
        rows.append(f"| {label} | {gb:.3f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | **{per_core_hour(gb, r):.2f}** | "
                    f"{r['removed']:,} | {r['peak_pss_mb']:.0f} | {r['peak_process_rss_mb']:.0f} |")
    head = ("| run | input GB | wall s | CPU s | GB per core-hour (CPU) | removed | peak PSS MB (tree) | "
            "peak RSS MB (largest process) |")
    lines = [f"Machine: {machine()}, shared with other jobs: load average {load[0]:.2f} before and {load[1]:.2f} "
             f"after the runs. {args.workers} workers each.", "", head, "|---|---:|---:|---:|---:|---:|---:|---:|",
             *rows]
    if "datatrove" in runs and "tokenmill_equal" in runs:
        dt, tm = runs["datatrove"], runs["tokenmill_equal"]
        lines += ["", f"Ratio at equal parameters: tokenmill {dt['cpu_s'] / tm['cpu_s']:.2f}x datatrove per CPU "
                      f"second, {dt['wall_s'] / tm['wall_s']:.2f}x wall."]
    stage_lines = [f"- {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in r["cpu_by_stage"].items())
                   for name, r in runs.items() if "cpu_by_stage" in r]
    graph_lines = [f"- {name}: " + ", ".join(f"{k} {v:,}" for k, v in r["graph"].items())
                   for name, r in runs.items() if r.get("graph")]
    if graph_lines:
        lines += ["", "MinHash's candidate graph (edges from the buckets, verified where checked; the components "
                      "stage's partitions and steps):", *graph_lines]
    lines += ["", "tokenmill's CPU seconds per stage (sum over units; the rest of the tree's CPU is the driver, "
                  "start-up and the worker pool):", *stage_lines]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="/work/shared/data")
    ap.add_argument("--mb", type=float, default=500)
    ap.add_argument("--exact-mb", type=float, nargs="*", default=[250, 500])
    ap.add_argument("--file-mb", type=float, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", nargs="+", default=["tokenmill_equal", "datatrove", "tokenmill_default", "exact"])
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="tokenmill-dedup-scale-"))
    load0 = os.getloadavg()[0]
    sizes: dict[float, dict] = {}

    def corpus(mb: float) -> Path:
        c = root / f"corpus-{int(mb)}"
        if mb not in sizes:
            meta = c.with_name(c.name + ".meta.json")
            if not meta.exists():
                meta.write_text(json.dumps(build_input(c, mb, args.file_mb, Path(args.shared))))
            sizes[mb] = json.loads(meta.read_text())
        return c

    plans = {"tokenmill_equal": ("minhash", {"bands": 14, "rows": 8, "verify": False}),
             "datatrove": ("datatrove", {}), "tokenmill_default": ("minhash", {})}
    runs = {}
    for name in args.runs:
        if name == "exact":
            for mb in args.exact_mb:
                r = measured("exact", corpus(mb), root / f"exact-{int(mb)}", workers=args.workers)
                runs[f"exact_{int(mb)}"] = {**r, "mb": mb}
                print(f"exact_{int(mb)}", json.dumps(r), flush=True)
            continue
        which, params = plans[name]
        r = measured(which, corpus(args.mb), root / name, workers=args.workers, params=params)
        runs[name] = {**r, "mb": args.mb}
        print(name, json.dumps(r), flush=True)
    body = report(runs, sizes, args, (load0, os.getloadavg()[0]))
    print(body)
    if not args.no_write:
        update_section("Dedup at scale: GB per core-hour", body)


def _child() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("which")
    ap.add_argument("--corpus")
    ap.add_argument("--work")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--params", default="{}")
    ap.add_argument("--result")
    args = ap.parse_args()
    fn = _datatrove if args.which == "_datatrove" else _tokenmill
    Path(args.result).write_text(json.dumps(fn(args)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        _child()
    else:
        main()
