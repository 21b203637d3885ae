"""Pretraining track: tokenization throughput and peak memory of tokenmill against its peers, in one run.

    python benchmarks/pretrain_throughput.py [--mb 200] [--big-mb 1000] [--big-peers bare_gigatoken]

1. Corpus: every document of ``SHARED/pretrain`` (JSONL, text, WARC; read with ``tokenmill.io``), drawn
   with replacement in a seeded shuffled order until ``--mb`` MB of UTF-8 text, written as Parquet files
   of about 25 MB under ``benchmarks/_work/`` (reused when already there).
2. Tokenizer: Qwen2 (``vocab.json`` + ``merges.txt`` + the Qwen2-Instruct ``tokenizer_config.json``)
   assembled into a directory that every approach loads.
3. On the same corpus, each approach in its own process (``peers.py``): the bare encoders (HF
   ``tokenizers`` ``encode_batch`` and gigatoken, texts already in memory), ``tokenmill pretrain``
   (``--workers``), HF ``datasets`` ``load_dataset`` + batched ``map`` (``num_proc`` = workers) and
   datatrove ``ParquetReader`` -> ``DocumentTokenizer`` (tasks = workers). Wall time and the peak RSS of
   each process tree (psutil, polled every 50 ms) are measured from outside.
   tokenmill runs twice: first with its parity-verdict cache emptied (as on a new corpus), then again
   (verdict cached, as on a re-run); the ratios use the first run. A tiny corpus (0.1 MB) measures the
   fixed start-up the same two ways.
4. tokenmill again on a ``--big-mb`` corpus, beside the ``--big-peers`` (default: bare gigatoken), for
   the throughput ratio at that size and the peak-memory ratio between the sizes.
5. Parity: the ids tokenmill wrote for a seeded sample of documents equal the HF tokenizer's ids.

Prints the table and ratios, and rewrites the section of BENCHMARKS.md (``--no-write`` to skip).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common import REPO, compile_sources, machine, run_measured, update_section

HERE = Path(__file__).resolve().parent
HEADING = "Pretraining track: tokenization throughput and memory"
FILE_MB = 25
PEERS = ("bare_hf", "bare_gigatoken", "hf_datasets", "datatrove")
LABELS = {
    "bare_hf": "HF tokenizers encode_batch (bare, texts in memory)",
    "bare_gigatoken": "gigatoken encode_batch (bare, texts in memory)",
    "tokenmill": "tokenmill pretrain (Parquet -> shards)",
    "tokenmill_warm": "tokenmill pretrain, re-run (parity verdict cached)",
    "hf_datasets": "HF datasets load_dataset + map(num_proc)",
    "datatrove": "datatrove ParquetReader -> DocumentTokenizer",
}


def tokenizer_dir(shared: Path, work: Path) -> Path:
    """Qwen2 vocab + merges + the Qwen2-Instruct tokenizer_config.json in one directory."""
    out = work / "qwen2_tokenizer"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shared / "tokenizers" / "qwen2_vocab.json", out / "vocab.json")
    shutil.copyfile(shared / "tokenizers" / "qwen2_merges.txt", out / "merges.txt")
    config = shared / "chat_templates" / "qwen2-1.5b-instruct-finetune_tokenizer_config.json"
    shutil.copyfile(config, out / "tokenizer_config.json")
    return out


def build_corpus(shared: Path, work: Path, *, mb: float, seed: int) -> dict:
    """Resampled Parquet corpus of ``mb`` MB in ``work/corpus-<mb>mb``; its description (reused if present)."""
    from tokenmill.bench.corpus import MB, iter_resampled, read_texts

    out = work / f"corpus-{mb:g}mb-seed{seed}"
    meta_path = out / "corpus.json"
    if meta_path.exists():
        return json.loads(meta_path.read_text())
    texts = read_texts([str(shared / "pretrain")])
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    docs, total, part, batch, batch_bytes = 0, 0, 0, [], 0
    for text in iter_resampled(texts, mb=mb, seed=seed):
        batch.append(text)
        batch_bytes += len(text.encode("utf-8"))
        if batch_bytes >= FILE_MB * MB:
            _write_part(out / f"part-{part:05d}.parquet", batch, first_id=docs)
            docs, total, part, batch, batch_bytes = docs + len(batch), total + batch_bytes, part + 1, [], 0
    if batch:
        _write_part(out / f"part-{part:05d}.parquet", batch, first_id=docs)
        docs, total = docs + len(batch), total + batch_bytes
    meta = {"dir": str(out), "docs": docs, "mb": total / MB, "unique_docs": len(texts),
            "unique_mb": sum(len(t.encode("utf-8")) for t in texts) / MB, "seed": seed}
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def _write_part(path: Path, texts: list[str], *, first_id: int) -> None:
    ids = [f"doc-{first_id + i:09d}" for i in range(len(texts))]
    pq.write_table(pa.table({"id": ids, "text": texts}), path, row_group_size=2000)


def run_tokenmill(corpus: dict, tok: Path, work: Path, *, workers: int, cold: bool = True) -> dict:
    """One ``tokenmill pretrain`` run; ``cold``: with the parity-verdict cache emptied first."""
    if cold:
        from tokenmill.tokenize.sources import cache_dir

        shutil.rmtree(cache_dir() / "parity", ignore_errors=True)
    out = work / f"tokenmill-{Path(corpus['dir']).name}"
    tokenmill = str(Path(sys.executable).with_name("tokenmill"))
    cmd = [tokenmill, "pretrain", corpus["dir"] + "/*.parquet", "--out", str(out), "--tokenizer", str(tok),
           "--workers", str(workers), "--no-progress", "--overwrite"]
    done = _checked(run_measured(cmd), "tokenmill pretrain")
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest.get("counts", manifest.get("totals", {}))
    return {"seconds": done["wall_s"], "wall_s": done["wall_s"], "peak_rss_mb": done["peak_rss_mb"],
            "peak_pss_mb": done["peak_pss_mb"],
            "docs": counts.get("kept"), "tokens": counts.get("tokens"), "out": str(out),
            "manifest_peak_rss": (manifest.get("run") or {}).get("peak_rss"), "cmd": " ".join(cmd)}


def run_peer(name: str, corpus: dict, tok: Path, work: Path, *, workers: int) -> dict:
    peer_work = work / f"{name}-{Path(corpus['dir']).name}"
    shutil.rmtree(peer_work, ignore_errors=True)
    cmd = [sys.executable, str(HERE / "peers.py"), name, "--corpus", corpus["dir"], "--tokenizer", str(tok),
           "--work", str(peer_work), "--workers", str(workers)]
    done = _checked(run_measured(cmd), name)
    result = json.loads(done["stdout"].strip().splitlines()[-1])
    shutil.rmtree(peer_work, ignore_errors=True)
    return {**result, "wall_s": done["wall_s"], "peak_rss_mb": done["peak_rss_mb"], "peak_pss_mb": done["peak_pss_mb"]}


def _checked(done: dict, what: str) -> dict:
    if done["rc"] != 0:
        raise SystemExit(f"{what} failed (exit {done['rc']}):\n{done['stderr'][-3000:]}")
    return done


def parity(out_dir: str, corpus_dir: str, tok: Path, *, n: int, seed: int) -> dict:
    """Compare tokenmill's ids for ``n`` sampled documents with ``AutoTokenizer`` (no special tokens)."""
    from transformers import AutoTokenizer

    from tokenmill.shards import open_shards

    shards = open_shards(out_dir)
    picks = np.random.default_rng(seed).choice(len(shards), size=min(n, len(shards)), replace=False)
    records = [shards[int(i)] for i in picks]
    parts = sorted(Path(corpus_dir).glob("*.parquet"))
    table = pa.concat_tables(pq.read_table(p, columns=["id", "text"]) for p in parts)
    wanted = pa.array([r["id"] for r in records])
    found = table.filter(pc.is_in(table.column("id"), value_set=wanted))
    text_of = dict(zip(found.column("id").to_pylist(), found.column("text").to_pylist()))
    reference = AutoTokenizer.from_pretrained(str(tok))
    eos = reference.convert_tokens_to_ids(reference.eos_token)
    mismatched = []
    for r in records:
        ids = r["input_ids"].tolist()
        body = ids[:-1] if ids and ids[-1] == eos else ids
        if body != reference(text_of[r["id"]], add_special_tokens=False)["input_ids"]:
            mismatched.append(r["id"])
    return {"checked": len(records), "mismatched": len(mismatched), "examples": mismatched[:5]}


def render(results: dict, corpus: dict, big: dict | None, checks: dict, *, command: str, workers: int) -> str:
    """The BENCHMARKS.md section: table, ratios, memory, parity, machine and command."""
    rows = ["| approach | corpus MB | s | MB/s | M tokens/s | tokens | peak PSS MB | peak RSS sum MB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    sized = [(results, corpus["mb"]), (big or {}, (big or {}).get("tokenmill", {}).get("mb"))]
    for group, mb in sized:
        for name in ("bare_hf", "bare_gigatoken", "tokenmill", "tokenmill_warm", "hf_datasets", "datatrove"):
            r = group.get(name)
            if r is None:
                continue
            rows.append(f"| {LABELS[name]} | {mb:.0f} | {r['seconds']:.1f} | {mb / r['seconds']:.1f} "
                        f"| {r['tokens'] / r['seconds'] / 1e6:.2f} | {r['tokens']:,} | {r['peak_pss_mb']:.0f} "
                        f"| {r['peak_rss_mb']:.0f} |")
    corpus_line = (
        f"Corpus: {corpus['docs']:,} documents, {corpus['mb']:.0f} MB of UTF-8 text, drawn with replacement "
        f"(seed {corpus['seed']}) from the {corpus['unique_docs']:,} documents ({corpus['unique_mb']:.1f} MB) of "
        "`shared/data/pretrain` (JSONL, plain text as one document per file, WARC), stored as Parquet "
        f"(snappy, {FILE_MB} MB files). Tokenizer: Qwen2 (151,643 + special ids). Workers: {workers}."
    )
    notes = (
        "Bare encoders: encoding time only (texts already in memory, batches of 1,000). Pipelines: wall time "
        "from start to written output, including reading Parquet and writing tokens. MB/s = corpus text MB / "
        "seconds; tokens include one EOS per document where the approach writes one. Each document of the "
        f"corpus appears about {corpus['mb'] / corpus['unique_mb']:.0f} times, which keeps every encoder's word "
        "cache warmer than a corpus of unique documents would. Memory is that of the whole process tree "
        "(workers included), polled every 50 ms: PSS counts pages shared by forked workers once, the RSS sum "
        "once per process."
    )
    load = (f"Machine: {machine()}; 1-minute load average {results['load_before']:.1f} when the run began, "
            f"{results['load_after']:.1f} when it ended (other jobs on the machine slow every approach).")
    if big and big.get("tokenmill", {}).get("mb", 1000) < 900:
        notes += (f" The larger corpus is {big['tokenmill']['mb']:.0f} MB, not 1 GB: on a shared 2-core machine a "
                  "1 GB run of each approach does not fit in a short benchmark; the ratio to bare gigatoken grows "
                  "with size, as the fixed start-up weighs less.")
    lines = [corpus_line, load, "", "\n".join(rows), "", notes, ""]
    lines += _ratio_lines(results, big)
    lines += ["", (f"Parity: tokenmill's ids for {checks['checked']} sampled documents vs `AutoTokenizer` "
                   f"(`add_special_tokens=False`): {checks['mismatched']} mismatched.")]
    lines += ["", "Reproduce (from the repository root):", "", "```", command, "```"]
    return "\n".join(lines)


def _ratio_lines(results: dict, big: dict | None) -> list[str]:
    tm = results.get("tokenmill")
    if tm is None:
        return []
    out = []
    if "startup" in results:
        st = results["startup"]
        out.append(f"- start-up (tokenmill on a {st['mb']:.1f} MB corpus, wall time of the whole command): "
                   f"{st['cold']['wall_s']:.1f} s with the parity check, {st['warm']['wall_s']:.1f} s with its "
                   "verdict cached")
    if "hf_datasets" in results:
        hf = results["hf_datasets"]
        out.append(f"- tokenmill end to end vs HF datasets load_dataset + map(num_proc) at {tm['mb']:.0f} MB: "
                   f"{hf['seconds'] / tm['seconds']:.1f}x faster (target >= 10x), "
                   f"{hf['peak_pss_mb'] / tm['peak_pss_mb']:.1f}x tokenmill's peak PSS")
    if "datatrove" in results:
        dt = results["datatrove"]
        out.append(f"- tokenmill vs {LABELS['datatrove']}: {dt['seconds'] / tm['seconds']:.1f}x faster")
    for group in (results, big or {}):
        bare, mine = group.get("bare_gigatoken"), group.get("tokenmill")
        if bare and mine:
            out.append(f"- at {mine['mb']:.0f} MB tokenmill end to end (read Parquet, encode, write shards, start-up "
                       f"included) runs at {bare['seconds'] / mine['seconds']:.0%} of bare gigatoken encode_batch "
                       f"measured on the same corpus (texts in memory, nothing read or written; target >= 50%)")
    if big and "tokenmill" in big:
        b = big["tokenmill"]
        out.append(f"- tokenmill peak PSS: {tm['peak_pss_mb']:.0f} MB at {tm['mb']:.0f} MB of input, "
                   f"{b['peak_pss_mb']:.0f} MB at {b['mb']:.0f} MB (ratio {b['peak_pss_mb'] / tm['peak_pss_mb']:.2f}; "
                   f"RSS sum {tm['peak_rss_mb']:.0f} -> {b['peak_rss_mb']:.0f} MB)")
        out.append(f"- tokenmill's own manifest `run.peak_rss`: {tm['manifest_peak_rss']} and {b['manifest_peak_rss']}")
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"), help="the shared data directory")
    p.add_argument("--work", default=str(HERE / "_work"), help="corpora and outputs (default benchmarks/_work)")
    p.add_argument("--mb", type=float, default=200.0, help="corpus size for every approach (default 200)")
    p.add_argument("--big-mb", type=float, default=1000.0, help="second size (0 = skip)")
    p.add_argument("--big-peers", default="bare_gigatoken", help="comma list of peers also run at --big-mb")
    p.add_argument("--startup-mb", type=float, default=0.1, help="tiny corpus for the start-up figure (0 = skip)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peers", default=",".join(PEERS), help="comma list of peers to run (empty = none)")
    p.add_argument("--parity-docs", type=int, default=200)
    p.add_argument("--no-write", action="store_true", help="do not rewrite BENCHMARKS.md")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    compile_sources()
    shared, work = Path(args.shared).resolve(), Path(args.work).resolve()
    tok = tokenizer_dir(shared, work)
    corpus = build_corpus(shared, work, mb=args.mb, seed=args.seed)
    print(f"corpus: {corpus['docs']:,} docs, {corpus['mb']:.1f} MB in {corpus['dir']}", flush=True)
    results: dict = {"load_before": os.getloadavg()[0]}
    for name in [p for p in args.peers.split(",") if p]:
        results[name] = run_peer(name, corpus, tok, work, workers=args.workers)
        print(f"{name}: {json.dumps(results[name])}", flush=True)
    results["tokenmill"] = {**run_tokenmill(corpus, tok, work, workers=args.workers), "mb": corpus["mb"]}
    print(f"tokenmill: {json.dumps(results['tokenmill'])}", flush=True)
    warm = run_tokenmill(corpus, tok, work, workers=args.workers, cold=False)
    results["tokenmill_warm"] = {**warm, "mb": corpus["mb"]}
    print(f"tokenmill re-run: {json.dumps(results['tokenmill_warm'])}", flush=True)
    checks = parity(results["tokenmill"]["out"], corpus["dir"], tok, n=args.parity_docs, seed=args.seed)
    print(f"parity: {checks}", flush=True)
    if args.startup_mb:
        tiny = build_corpus(shared, work, mb=args.startup_mb, seed=args.seed)
        results["startup"] = {"mb": tiny["mb"],
                              "cold": run_tokenmill(tiny, tok, work, workers=args.workers),
                              "warm": run_tokenmill(tiny, tok, work, workers=args.workers, cold=False)}
        print(f"start-up: {json.dumps(results['startup'], default=str)}", flush=True)
    big = None
    if args.big_mb:
        big_corpus = build_corpus(shared, work, mb=args.big_mb, seed=args.seed)
        big = {name: run_peer(name, big_corpus, tok, work, workers=args.workers)
               for name in [p for p in args.big_peers.split(",") if p]}
        big["tokenmill"] = {**run_tokenmill(big_corpus, tok, work, workers=args.workers), "mb": big_corpus["mb"]}
        print(f"at {big_corpus['mb']:.0f} MB: {json.dumps(big)}", flush=True)
        shutil.rmtree(big["tokenmill"]["out"], ignore_errors=True)
    results["load_after"] = os.getloadavg()[0]
    command = "python benchmarks/pretrain_throughput.py " + " ".join(argv)
    section = render(results, corpus, big, checks, command=command.strip(), workers=args.workers)
    print("\n" + section)
    if not args.no_write:
        update_section(HEADING, section)
    return 1 if checks["mismatched"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
