"""Fuzzy dedup, tokenmill vs datatrove's four-stage MinHash pipeline, in one run: quality, speed, memory.

    python benchmarks/dedup.py [--shared ../shared/data] [--workdir DIR] [--scale-mb 25 100]

Corpus. Real documents from ``shared/data`` (``pretrain`` JSONL and text files, ``curation/cc_text``,
the two documents of ``curation/neardup``'s near-duplicate pair and MRPC's sentence pairs), plus planted
near-duplicates of a third of them: exact copies with case and whitespace changed, word substitutions at
1, 3, 5, 10 and 20%, a boilerplate line added, a line deleted. Truth is the exact Jaccard similarity of
the word 5-gram sets (NFKC, lowercase, punctuation removed), enumerated for every pair at or above 0.5 by
prefix filtering (exact: no pair is missed).

Metrics. Recall: the share of pairs with Jaccard >= 0.8 whose two documents end in one cluster.
Precision: the share of removed documents that have a document of Jaccard >= 0.8 in their cluster (and,
looser, >= 0.5). Orphans: clusters left without a survivor. Speed: raw JSONL files to removal ids, wall
clock of the whole pipeline in a fresh process, 2 workers each. Peak memory of the process tree (PSS).

Memory bound. tokenmill alone, at two corpus sizes (``--scale-mb``, real documents resampled with fresh
edits), with ``partition_edges`` fixed: the peak RSS of each stage's workers.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from common import machine, run_measured, update_section

FILES = 8
BOILER = "Copyright 2024 All rights reserved. Subscribe to our newsletter for updates."
NORM = ("nfkc", "lower", "punctuation", "whitespace")


# --- corpus ---------------------------------------------------------------------------------------


def real_documents(shared: Path) -> list[str]:
    docs: list[str] = []
    pre = shared / "pretrain"
    for name in ("llamafactory_c4_demo.jsonl", "dclm_quality_agreement_data.jsonl", "dolma_cc_en_head-0091.jsonl",
                 "dolma_cc_en_head-0174.jsonl", "datajuicer_demo-dataset-deduplication.jsonl"):
        docs += [json.loads(line)["text"] for line in (pre / name).read_text().splitlines() if line.strip()]
    with gzip.open(pre / "dolma_provided_documents_000.json.gz", "rt") as fh:
        docs += [json.loads(line)["text"] for line in fh if line.strip()]
    docs += [line for line in (pre / "llamafactory_wiki_demo.txt").read_text().splitlines() if line.strip()]
    for name in ("gutenberg_1342_pride_and_prejudice.txt", "gutenberg_pg1342_with_license_footer.txt"):
        docs.append((pre / name).read_text())
    for cc in sorted((shared / "curation" / "cc_text").glob("*.jsonl.gz")):
        with gzip.open(cc, "rt") as fh:
            docs += [json.loads(line)["text"] for line in fh if line.strip()]
    pair = json.loads((shared / "curation" / "neardup" / "copycat_cc1704_near_duplicate_pair.json").read_text())
    docs += [pair["firstDocument"]["content"], pair["secondDocument"]["content"]]
    for line in (shared / "curation" / "neardup" / "mrpc_msr_paraphrase_test.txt").read_text().splitlines()[1:]:
        cols = line.split("\t")
        if len(cols) == 5:
            docs += [cols[3], cols[4]]
    return [d for d in docs if d.strip()]


EDITS = ("case_space", "sub_0.01", "sub_0.03", "sub_0.05", "sub_0.10", "sub_0.20", "boilerplate", "delete_line")


def edit(rng: random.Random, text: str, kind: str, vocab: list[str]) -> str:
    if kind == "case_space":
        return text.upper().replace(" ", "  ", 10).replace("\n", " \n")
    if kind.startswith("sub_"):
        rate = float(kind[4:])
        words = text.split(" ")
        return " ".join(rng.choice(vocab) if rng.random() < rate else w for w in words)
    if kind == "boilerplate":
        return text + "\n" + BOILER
    lines = text.split("\n")
    if len(lines) > 1:
        del lines[rng.randrange(len(lines))]
        return "\n".join(lines)
    words = text.split(" ")
    return " ".join(words[: len(words) * 9 // 10])


def build_corpus(shared: Path, out: Path, *, target_mb: float | None, seed: int = 0, files: int = FILES) -> dict:
    """JSONL files of ``{"id", "text"}``; returns the planted (copy id, original id, edit) triples."""
    rng = random.Random(seed)
    real = real_documents(shared)
    vocab = sorted({w for d in real[:300] for w in d.split()[:200]})
    docs = [(f"r{i}", t) for i, t in enumerate(real)]
    planted = []
    long_enough = [i for i, t in enumerate(real) if len(t.split()) >= 50]
    for n, i in enumerate(rng.sample(long_enough, len(long_enough) // 3)):
        kind = EDITS[n % len(EDITS)]
        docs.append((f"p{n}", edit(rng, real[i], kind, vocab)))
        planted.append((f"p{n}", f"r{i}", kind))
    size = sum(len(t.encode()) for _, t in docs)
    n = 0
    while target_mb and size < target_mb * 1e6:  # grow: resampled real documents, each freshly edited
        i = rng.randrange(len(real))
        text = edit(rng, real[i], rng.choice(EDITS), vocab) + f"\nrevision {n}"
        docs.append((f"g{n}", text))
        size += len(text.encode())
        n += 1
    rng.shuffle(docs)
    out.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        with open(out / f"part-{f:03d}.jsonl", "w") as fh:
            for doc_id, text in docs[f::files]:
                fh.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return {"planted": planted, "docs": len(docs), "mb": size / 1e6}


# --- truth ----------------------------------------------------------------------------------------


def truth_pairs(corpus: Path, low: float = 0.5) -> tuple[list[str], dict[tuple[int, int], float]]:
    """Every pair of Jaccard >= ``low`` (word 5-grams), by prefix filtering over hash-ordered sets."""
    import pyarrow as pa

    from tokenmill.curate.dedup.shingles import shingle_sets

    ids, texts = [], []
    for f in sorted(corpus.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            d = json.loads(line)
            ids.append(d["id"])
            texts.append(d["text"])
    sets = []
    for lo in range(0, len(texts), 512):
        sets += shingle_sets(pa.array(texts[lo:lo + 512]), kind="word", n=5, normalize=NORM)
    index: dict[int, list[int]] = {}
    for i, s in enumerate(sets):
        for h in s[: len(s) - int(np.ceil(low * len(s))) + 1].tolist():
            index.setdefault(h, []).append(i)
    cands = {(a, b) for docs in index.values() for a, b in itertools.combinations(docs, 2)}
    out = {}
    for a, b in cands:
        x, y = sets[a], sets[b]
        inter = len(np.intersect1d(x, y, assume_unique=True))
        sim = inter / (len(x) + len(y) - inter) if len(x) + len(y) else 1.0
        if sim >= low:
            out[(a, b)] = sim
    return ids, out


def quality(ids: list[str], truth: dict, removed: set[str], cluster: dict[str, object]) -> dict:
    pos = {i: n for n, i in enumerate(ids)}
    positives = [p for p, s in truth.items() if s >= 0.8]
    same = lambda a, b: cluster.get(ids[a]) is not None and cluster.get(ids[a]) == cluster.get(ids[b])
    found = sum(1 for a, b in positives if same(a, b))
    best: dict[int, float] = {}
    for (a, b), s in truth.items():
        if same(a, b):
            best[a] = max(best.get(a, 0), s)
            best[b] = max(best.get(b, 0), s)
    rem = [pos[r] for r in removed]
    members: dict[object, list[str]] = {}
    for doc, c in cluster.items():
        members.setdefault(c, []).append(doc)
    orphans = sum(1 for m in members.values() if all(d in removed for d in m))
    return {"pairs_08": len(positives), "recall": found / max(1, len(positives)),
            "precision": sum(best.get(r, 0) >= 0.8 for r in rem) / max(1, len(rem)),
            "precision_05": sum(best.get(r, 0) >= 0.5 for r in rem) / max(1, len(rem)),
            "removed": len(removed), "clusters": len(members), "orphans": orphans}


# --- the two pipelines, each in its own process ----------------------------------------------------


def run_tokenmill(args: argparse.Namespace) -> dict:
    from dataclasses import dataclass  # noqa: F401

    import pyarrow.parquet as pq

    from bench_dedup_source import jsonl_source_stage
    from tokenmill.curate.dedup.minhash import MinHashDedup
    from tokenmill.engine import LocalExecutor, run_workflow

    params = json.loads(args.params)
    step = MinHashDedup(**params)
    start = time.perf_counter()
    files = sorted(str(p) for p in Path(args.corpus).glob("*.jsonl"))
    res = run_workflow([jsonl_source_stage(files), *step.stages("source")], out=args.work, fingerprint="bench",
                       executor=LocalExecutor(workers=args.workers))
    removed, cluster = [], {}
    for r in res[step.name]:
        led = pq.read_table(Path(args.work) / r.data["ledger"]).to_pydict()
        for i, k, c in zip(led["id"], led["kept"], led[f"{step.name}.cluster"]):
            if not k:
                removed.append(i)
            if c != -1:
                cluster[i] = c
    seconds = time.perf_counter() - start
    peaks = {name: max((r.peak_rss_mb for r in rs), default=0.0) for name, rs in res.items()}
    extra = res.get(f"{step.name}.components", [None])[0]
    busy = {name: round(sum(r.seconds for r in rs), 2) for name, rs in res.items()}
    return {"seconds": seconds, "removed": removed, "cluster": cluster, "stage_peak_rss_mb": peaks, "busy_s": busy,
            "components": extra.data if extra else {}}


def run_datatrove(args: argparse.Namespace) -> dict:
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

    work = Path(args.work)
    cfg = MinhashConfig()
    w = args.workers
    start = time.perf_counter()
    from bench_dedup_source import xxhash64_str

    signature = MinhashDedupSignature(str(work / "sigs"), config=cfg)
    signature._hash_func = xxhash64_str  # the installed xxhash takes bytes only; same hash, same speed
    s1 = LocalPipelineExecutor(pipeline=[JsonlReader(args.corpus), signature],
                               tasks=FILES, workers=w, logging_dir=str(work / "log1"))
    s2 = LocalPipelineExecutor(pipeline=[MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=cfg)],
                               tasks=cfg.num_buckets, workers=w, logging_dir=str(work / "log2"), depends=s1)
    s3 = LocalPipelineExecutor(pipeline=[MinhashDedupCluster(str(work / "buckets"), str(work / "ids"), config=cfg,
                                                             save_cluster_id=True)],
                               tasks=1, logging_dir=str(work / "log3"), depends=s2)
    s4 = LocalPipelineExecutor(pipeline=[JsonlReader(args.corpus),
                                         MinhashDedupFilter(str(work / "ids"), load_cluster_ids=True,
                                                            exclusion_writer=JsonlWriter(str(work / "removed"),
                                                                                         compression=None)),
                                         JsonlWriter(str(work / "kept"), compression=None)],
                               tasks=FILES, workers=w, logging_dir=str(work / "log4"), depends=s3)
    s4.run()
    seconds = time.perf_counter() - start
    removed, cluster = [], {}
    for kind in ("removed", "kept"):
        for f in sorted((work / kind).glob("*.jsonl")):
            for line in f.read_text().split("\n"):  # not splitlines(): U+2028 inside a string is no newline
                if not line:
                    continue
                d = json.loads(line)
                if kind == "removed":
                    removed.append(d["id"])
                c = d.get("metadata", {}).get("minhash_cluster_id")
                if c is not None and c != -1:
                    cluster[d["id"]] = c
    return {"seconds": seconds, "removed": removed, "cluster": cluster}


def measured(which: str, corpus: Path, work: Path, *, workers: int = 2, params: dict | None = None) -> dict:
    result = work.with_name(work.name + ".json")
    cmd = [sys.executable, __file__, f"_{which}", "--corpus", str(corpus), "--work", str(work),
           "--workers", str(workers), "--params", json.dumps(params or {}), "--result", str(result)]
    m = run_measured(cmd)
    if m["rc"] != 0:
        raise RuntimeError(f"{which} failed:\n{m['stderr'][-3000:]}")
    out = json.loads(result.read_text())
    measure = {"wall_s": m["wall_s"], "peak_rss_mb": m["peak_rss_mb"], "peak_pss_mb": m["peak_pss_mb"]}
    work.with_name(work.name + ".measure.json").write_text(json.dumps(measure))
    out.update(measure)
    return out


# --- report ---------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--scale-mb", type=float, nargs=2, default=[15.0, 60.0])
    ap.add_argument("--partition-edges", type=int, default=20_000)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--report-only", action="store_true", help="rebuild the section from --workdir's results")
    args = ap.parse_args()
    shared = Path(args.shared)
    if not (shared / "pretrain").is_dir():
        shared = Path("/work/shared/data")
    root = Path(args.workdir or tempfile.mkdtemp(prefix="tokenmill-dedup-bench-"))
    corpus = root / "corpus"
    if args.report_only:
        return _report_only(root, corpus, shared, args)
    info = build_corpus(shared, corpus, target_mb=None)
    ids, truth = truth_pairs(corpus)
    runs = {
        "tokenmill_default": ("tokenmill", {}),
        "tokenmill_equal": ("tokenmill", {"bands": 14, "rows": 8, "verify": False}),
        "datatrove": ("datatrove", {}),
    }
    results = {}
    for name, (which, params) in runs.items():
        r = measured(which, corpus, root / name, params=params)
        r["quality"] = quality(ids, truth, set(r["removed"]), r["cluster"])
        results[name] = r
        print(name, json.dumps({k: v for k, v in r.items() if k not in ("removed", "cluster")}), flush=True)
    scale = []
    for mb in args.scale_mb:
        c = root / f"corpus-{int(mb)}"
        meta = build_corpus(shared, c, target_mb=mb, seed=1, files=max(1, round(mb / 2)))  # units of ~2 MB
        c.with_name(c.name + ".meta.json").write_text(json.dumps(meta))
        r = measured("tokenmill", c, root / f"scale-{int(mb)}", params={"partition_edges": args.partition_edges})
        scale.append((mb, meta, r))
        print("scale", mb, meta["docs"], r["wall_s"], r["peak_pss_mb"], r["stage_peak_rss_mb"], r["components"],
              flush=True)
    body = report(info, results, scale, args.partition_edges)
    print(body)
    if not args.no_write:
        update_section("Fuzzy dedup vs datatrove", body)


def _report_only(root: Path, corpus: Path, shared: Path, args: argparse.Namespace) -> None:
    info = build_corpus(shared, root / "corpus-check", target_mb=None)  # same seed: same corpus, same counts
    ids, truth = truth_pairs(corpus)
    results = {}
    for name in ("tokenmill_default", "tokenmill_equal", "datatrove"):
        r = json.loads((root / f"{name}.json").read_text())
        r.update(json.loads((root / f"{name}.measure.json").read_text()))
        r["quality"] = quality(ids, truth, set(r["removed"]), r["cluster"])
        results[name] = r
    scale = []
    for mb in args.scale_mb:
        meta = json.loads((root / f"corpus-{int(mb)}.meta.json").read_text())
        r = json.loads((root / f"scale-{int(mb)}.json").read_text())
        r.update(json.loads((root / f"scale-{int(mb)}.measure.json").read_text()))
        scale.append((mb, meta, r))
    body = report(info, results, scale, args.partition_edges)
    print(body)
    if not args.no_write:
        update_section("Fuzzy dedup vs datatrove", body)


def report(info: dict, results: dict, scale: list, bound: int) -> str:
    rows = []
    labels = {"tokenmill_default": "tokenmill `{name: minhash_dedup}` (defaults: 20x7, verified at 0.8)",
              "tokenmill_equal": "tokenmill at datatrove's parameters (14x8, no verification)",
              "datatrove": "datatrove MinHash, 4 stages, defaults (5-grams, 14x8)"}
    for name, r in results.items():
        q = r["quality"]
        rows.append(f"| {labels[name]} | {q['recall']:.4f} | {q['precision']:.4f} | {q['precision_05']:.4f} | "
                    f"{q['removed']:,} | {q['clusters']:,} | {q['orphans']} | {r['wall_s']:.1f} | "
                    f"{info['docs'] / r['wall_s']:,.0f} | {r['peak_pss_mb']:.0f} |")
    dt = results["datatrove"]["wall_s"]
    q8 = results["datatrove"]["quality"]["pairs_08"]
    corpus = (f"Corpus: {info['docs']:,} documents, {info['mb']:.1f} MB: the real documents of shared/data "
              f"(pretrain, curation/cc_text, curation/neardup) and {len(info['planted']):,} planted near-duplicates "
              f"of a third of them ({', '.join(EDITS)}). Truth: exact Jaccard of word 5-grams; {q8:,} pairs at "
              f">= 0.8. Machine: {machine()}; 2 workers each.")
    header = ("| pipeline | recall (J >= 0.8) | precision (J >= 0.8) | precision (J >= 0.5) | removed | clusters | "
              "clusters without survivor | seconds | docs/s | peak PSS MB |")
    speed = (f"Speed, raw JSONL to removal ids: tokenmill at equal parameters "
             f"{dt / results['tokenmill_equal']['wall_s']:.2f}x datatrove; tokenmill at its defaults (more hashes "
             f"and an exact-Jaccard check of every candidate) {dt / results['tokenmill_default']['wall_s']:.2f}x "
             "(target >= 3x).")
    bound_line = (f"Memory bound: tokenmill defaults with `partition_edges={bound:,}`, the same documents resampled "
                  "with fresh edits to two sizes, in input files (work units) of about 2 MB (sizes kept modest: the "
                  "machine has 2 cores shared with other jobs). A stage's worker peak stays flat when the input "
                  "grows 4x:")
    scale_header = ("| input MB | documents | seconds | docs/s | peak PSS MB (tree) | peak RSS MB per stage worker: "
                    "signatures / buckets / verify / components / apply | components: partitions, rounds, most rows "
                    "held |")
    lines = [corpus, "", header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *rows, "", speed, "",
             bound_line, "", scale_header, "|---:|---:|---:|---:|---:|---|---|"]
    for _mb, meta, r in scale:
        p = r["stage_peak_rss_mb"]
        stages = " / ".join(f"{p.get(k, 0):.0f}" for k in ("minhash_dedup.signatures", "minhash_dedup.buckets",
                                                           "minhash_dedup.verify", "minhash_dedup.components",
                                                           "minhash_dedup"))
        c = r["components"]
        lines.append(f"| {meta['mb']:.0f} | {meta['docs']:,} | {r['wall_s']:.1f} | {meta['docs'] / r['wall_s']:,.0f} | "
                     f"{r['peak_pss_mb']:.0f} | {stages} | {c.get('partitions')}, {c.get('rounds')}, "
                     f"{max(c.get('held', {}).values(), default=0):,} |")
    lines += ["", "Reproduce: `python benchmarks/dedup.py` (datatrove from the `bench` extra)."]
    return "\n".join(lines)


def _child() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("which")
    ap.add_argument("--corpus")
    ap.add_argument("--work")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--params", default="{}")
    ap.add_argument("--result")
    args = ap.parse_args()
    fn = run_tokenmill if args.which == "_tokenmill" else run_datatrove
    Path(args.result).write_text(json.dumps(fn(args)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        _child()
    else:
        main()
