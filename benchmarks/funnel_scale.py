"""The whole ``--preset dclm`` funnel then ``pretrain``, tokenmill against datatrove's same pipeline, one command.

    python benchmarks/funnel_scale.py [--mb 250] [--workers 2] [--datatrove-docs 1000] [--shared ../shared/data]
        [--before-src DIR]

Input: ``--mb`` MB of real crawl text (``benchmarks/crawl_corpus.py``: the web pages of ``../shared/data``
resampled with fresh edits), one JSONL file. Quality model: ``tokenmill quality train`` defaults on the
reference-vs-web sets of ``benchmarks/quality.py``; both sides load the same file.

tokenmill: ``tokenmill curate CORPUS --preset dclm --quality-model M --workers W`` (URL, language, Gopher
repetition and quality, RefinedWeb rules, exact + MinHash dedup, quality top 10%), then ``tokenmill pretrain
OUT/documents --tokenizer gpt2/tokenizer.json`` (GPT-2's BPE from ``tokenizers/``). CPU seconds per stage
come from the units' own CPU time (the ``cpu_seconds`` of every completion marker); the drivers' share is the
rest.

datatrove (one process, one task, the first ``--datatrove-docs`` documents of the same file: its spaCy
word splitting takes seconds per hundred documents here): ``JsonlReader -> URLFilter -> LanguageFilter ->
GopherRepetitionFilter -> GopherQualityFilter -> C4QualityFilter -> JsonlWriter``, MinHash's four stages
(signatures, buckets, clusters, filter), ``FastTextClassifierFilter`` on the same model keeping scores at or
above tokenmill's top-10% cut, then ``DocumentTokenizer`` with the same tokenizer. Two substitutions, both
forced by this machine having no network: datatrove's ``LanguageFilter`` downloads fastText's lid.176 at run
time, so a one-line datatrove filter calling py3langid (the model tokenmill's ``language`` step uses, at the
same 0.65 threshold) stands in for it; and datatrove has no exact-dedup stage for documents in this
pipeline shape, so its MinHash stage removes exact copies too.

Both are compared in documents of input per CPU second (all processes of each side). ``--before-src DIR`` runs
the tokenmill side a first time with another version's ``src`` on ``PYTHONPATH`` (``git archive main src``),
same input and model, prints its row and CPU per stage beside this checkout's, and says whether the two wrote
the same bytes in every documents and ledger file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, compile_sources, machine, run_per_process, update_section  # noqa: E402

HEADING = "The dclm funnel then pretrain at scale: tokenmill vs datatrove"
EOS = "<|endoftext|>"


def gpt2_tokenizer(shared: Path, work: Path) -> str:
    """GPT-2's BPE (``tokenizers/gpt2_vocab.json`` + ``gpt2_merges.txt``) saved as one ``tokenizer.json``."""
    from tokenizers import AddedToken, ByteLevelBPETokenizer

    folder = shared / "tokenizers"
    tok = ByteLevelBPETokenizer(str(folder / "gpt2_vocab.json"), str(folder / "gpt2_merges.txt"))
    tok.add_special_tokens([AddedToken(EOS, special=True)])
    out = work / "gpt2" / "tokenizer.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out))
    (out.parent / "tokenizer_config.json").write_text(json.dumps({"eos_token": EOS}))
    return str(out)


def tokenmill_side(corpus: Path, work: Path, model: str, workers: int, tokenizer: str, *, src: Path = REPO / "src",
                   tag: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cli = [sys.executable, "-m", "tokenmill.cli"]
    cur_dir, shards = work / f"cur{tag}", work / f"shards{tag}"
    cur = run_per_process([*cli, "curate", str(corpus), "--out", str(cur_dir), "--preset", "dclm",
                           "--quality-model", model, "--workers", str(workers), "--no-progress"], env=env)
    if cur["rc"]:
        raise SystemExit(f"curate failed: {cur['stderr'][-3000:]}")
    pre = run_per_process([*cli, "pretrain", str(cur_dir / "documents"), "--out", str(shards),
                           "--tokenizer", tokenizer, "--workers", str(workers), "--no-progress"], env=env)
    if pre["rc"]:
        raise SystemExit(f"pretrain failed: {pre['stderr'][-3000:]}")
    m = json.loads((cur_dir / "manifest.json").read_text())
    return {"curate": cur, "pretrain": pre, "manifest": m, "stage_cpu": stage_cpu(cur_dir),
            "pretrain_stage_cpu": stage_cpu(shards), "cut": quality_cut(m), "tables": output_digests(cur_dir)}


def output_digests(out: Path) -> dict[str, str]:
    """sha256 of every documents and ledger file a curate run wrote (the two sides must agree byte for byte)."""
    import hashlib

    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for d in ("documents", "ledger") for p in sorted((out / d).glob("*.parquet"))}


def stage_cpu(out: Path) -> dict[str, float]:
    """CPU seconds of every stage's units, from their results (the stage's index, or its markers)."""
    from common import stage_results

    cpu: dict[str, float] = {}
    for stage in sorted(d for d in (out / "_state").iterdir() if (d / "run.json").is_file()):
        cpu[stage.name] = sum(r.get("cpu_seconds", 0.0) for r in stage_results(stage))
    return cpu


def quality_cut(m: dict) -> float:
    for row in m["funnel"]["rows"]:
        if row.get("histogram") and "cut" in row["histogram"]:
            return float(row["histogram"]["cut"])
    return 0.5


def datatrove_side(corpus: Path, work: Path, model: str, docs: int, cut: float, tokenizer: str) -> dict:
    """Run in its own process (``--run datatrove``): the whole pipeline, timed per stage in CPU seconds."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FastTextClassifierFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LambdaFilter,
        URLFilter,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer
    from datatrove.pipeline.writers.jsonl import JsonlWriter
    from tldextract import TLDExtract

    from bench_dedup_source import xxhash64_str

    sample = work / "dt_input" / "sample.jsonl"
    sample.parent.mkdir(parents=True)
    with open(corpus, encoding="utf-8") as src, open(sample, "w", encoding="utf-8") as dst:
        for _, line in zip(range(docs), src):
            dst.write(line)
    english = py3langid_filter()
    cfg = MinhashConfig()
    signature = MinhashDedupSignature(str(work / "sigs"), config=cfg)
    signature._hash_func = xxhash64_str  # the installed xxhash takes bytes only; same hash
    # the fastText module is installed from the fasttext-community wheel; datatrove asks for fasttext-numpy2-wheel
    FastTextClassifierFilter._requires_dependencies = [("fasttext", "fasttext-community"), "fasteners"]
    url_filter = URLFilter()
    url_filter.tldextractor = TLDExtract(suffix_list_urls=())  # the bundled suffix list: no network here
    reader = lambda path: JsonlReader(str(path), text_key="text", id_key="id", default_metadata=None)
    stages = {
        "filters (URL, language, Gopher x2, C4 lines)": [
            reader(sample.parent), url_filter, LambdaFilter(english), GopherRepetitionFilter(), GopherQualityFilter(),
            C4QualityFilter(filter_no_terminal_punct=False), JsonlWriter(str(work / "filtered"), compression=None)],
        "minhash signatures": [reader(work / "filtered"), signature],
        "minhash buckets": [MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=cfg)],
        "minhash clusters": [MinhashDedupCluster(str(work / "buckets"), str(work / "ids"), config=cfg)],
        "minhash filter + fastText quality": [
            reader(work / "filtered"), MinhashDedupFilter(str(work / "ids")),
            FastTextClassifierFilter(model, keep_labels=("hq", cut), save_labels_in_metadata=False),
            JsonlWriter(str(work / "kept"), compression=None)],
        "tokenize": [reader(work / "kept"), DocumentTokenizer(str(work / "tokens"), tokenizer_name_or_path=tokenizer,
                                                              eos_token=EOS, shuffle_documents=False)],
    }
    cpu: dict[str, float] = {}
    tasks = {"minhash buckets": cfg.num_buckets}
    for i, (name, pipeline) in enumerate(stages.items()):
        t0 = time.process_time()
        LocalPipelineExecutor(pipeline=pipeline, tasks=tasks.get(name, 1), workers=1,
                              logging_dir=str(work / f"log{i}")).run()
        cpu[name] = time.process_time() - t0
    kept = sum(1 for f in (work / "kept").glob("*.jsonl") for _ in open(f))
    return {"docs": docs, "stage_cpu": cpu, "kept": kept}


def py3langid_filter():
    """datatrove's LanguageFilter rule (keep English at a score of 0.65 or more) over py3langid's model."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)

    def english(doc) -> bool:
        lang, score = ident.classify(doc.text.replace("\n", " "))
        return lang == "en" and score >= 0.65

    return english


def count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def _cpu(tm: dict) -> float:
    return tm["curate"]["cpu_s"] + tm["pretrain"]["cpu_s"]


def _stages(tm: dict) -> dict[str, float]:
    stage = {**tm["stage_cpu"], **{f"pretrain: {k}": v for k, v in tm["pretrain_stage_cpu"].items()}}
    stage["driver processes (curate, pretrain)"] = max(0.0, _cpu(tm) - sum(stage.values()))
    return stage


def report(tm: dict, dt: dict, info: dict, args: argparse.Namespace, load: tuple, before: dict | None = None) -> str:
    cur, pre, m = tm["curate"], tm["pretrain"], tm["manifest"]
    tm_cpu = _cpu(tm)
    dt_cpu = sum(dt["stage_cpu"].values())
    tm_rate, dt_rate = info["docs"] / tm_cpu, dt["docs"] / dt_cpu
    rss = sorted(list(cur["peak_rss_mb"].values()) + list(pre["peak_rss_mb"].values()), reverse=True)
    flags = f" --before-src {args.before_src}" if before else ""
    lines = [
        f"`python benchmarks/funnel_scale.py --mb {args.mb:g} --workers {args.workers} --datatrove-docs "
        f"{args.datatrove_docs}{flags}` ({machine()}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the "
        f"start, shared with other jobs). Input: one {info['bytes'] / 1e6:.0f} MB JSONL file, "
        f"{info['docs']:,} documents resampled with fresh edits from {info['base_docs']:,} real web pages "
        "(`benchmarks/crawl_corpus.py`). datatrove ran on the first "
        f"{dt['docs']:,} documents of the same file, one process.", "",
        "| side | documents | CPU s | documents / CPU s | kept | wall s |", "|---|---|---|---|---|---|"]
    if before:
        b_cpu = _cpu(before)
        lines.append(f"| tokenmill before (`{args.before_src}`), same command | {info['docs']:,} | {b_cpu:.1f} | "
                     f"{info['docs'] / b_cpu:,.1f} | {before['manifest']['counts']['kept']:,} | "
                     f"{before['curate']['wall_s'] + before['pretrain']['wall_s']:.1f} |")
    lines += [
        f"| tokenmill curate --preset dclm + pretrain, {args.workers} workers | {info['docs']:,} | {tm_cpu:.1f} | "
        f"{tm_rate:,.1f} | {m['counts']['kept']:,} | {cur['wall_s'] + pre['wall_s']:.1f} |",
        f"| datatrove, same pipeline | {dt['docs']:,} | {dt_cpu:.1f} | {dt_rate:,.1f} | {dt['kept']:,} | |", ""]
    if before:
        same = before["tables"] == tm["tables"]
        lines += [f"tokenmill before / datatrove: {info['docs'] / _cpu(before) / dt_rate:,.1f}x. The two tokenmill "
                  f"sides wrote {'the same' if same else 'DIFFERENT'} bytes in all {len(tm['tables'])} documents and "
                  "ledger files.", ""]
    lines += [
        f"tokenmill / datatrove: **{tm_rate / dt_rate:,.1f}x** documents per CPU second (goal >= 20x).", "",
        "Where the CPU goes, tokenmill (units' own CPU time from their markers; driver = the rest of each command):",
        ""]
    stage = _stages(tm)
    if before:
        old = _stages(before)
        lines += ["| stage | before CPU s | CPU s | share |", "|---|---|---|---|"]
        for k, v in stage.items():
            lines.append(f"| {k} | {old.get(k, 0.0):.1f} | {v:.1f} | {v / tm_cpu:.0%} |")
    else:
        lines += ["| stage | CPU s | share |", "|---|---|---|"]
        for k, v in stage.items():
            lines.append(f"| {k} | {v:.1f} | {v / tm_cpu:.0%} |")
    lines += ["", f"Where the CPU goes, datatrove ({dt['docs']:,} documents):", "", "| stage | CPU s | share |", "|---|---|---|"]
    for k, v in dt["stage_cpu"].items():
        lines.append(f"| {k} | {v:.1f} | {v / dt_cpu:.0%} |")
    lines += ["", f"Peak RSS of every tokenmill process (MB, largest first): {', '.join(f'{v:.0f}' for v in rss)}; "
              f"curate driver {cur['main_rss_mb']:.0f} MB, pretrain driver {pre['main_rss_mb']:.0f} MB."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mb", type=float, default=250)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--datatrove-docs", type=int, default=1000)
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--model", help="a quality model to use instead of training one")
    p.add_argument("--work", help="keep the work files here (default: a temporary directory)")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--before-src", help="another tokenmill src (e.g. `git archive main src`): its run, same input, "
                   "goes first, and its row and CPU per stage are printed beside this checkout's")
    p.add_argument("--run", help=argparse.SUPPRESS)
    p.add_argument("--cut", type=float, default=0.5, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    compile_sources()
    shared = Path(args.shared)
    if args.run:  # the datatrove side, in its own process
        work = Path(args.work)
        print(json.dumps(datatrove_side(work / "crawl.jsonl", work / "dt", args.model, args.datatrove_docs,
                                        args.cut, str(work / "gpt2" / "tokenizer.json"))))
        return 0
    with tempfile.TemporaryDirectory(prefix="tokenmill-funnel-", dir=args.work) as tmp:
        work = Path(tmp)
        from crawl_corpus import write_corpus

        info = write_corpus(work / "crawl.jsonl", shared=shared, mb=args.mb)
        model = args.model or train_model(shared, work)
        tokenizer = gpt2_tokenizer(shared, work)
        load = os.getloadavg()
        before = tokenmill_side(work / "crawl.jsonl", work, model, args.workers, tokenizer, src=Path(args.before_src),
                                tag="_before") if args.before_src else None
        tm = tokenmill_side(work / "crawl.jsonl", work, model, args.workers, tokenizer)
        dt_run = run_per_process([sys.executable, __file__, "--run", "datatrove", "--work", str(work), "--model", model,
                                  "--datatrove-docs", str(args.datatrove_docs), "--cut", str(tm["cut"]),
                                  "--shared", str(shared)], env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        if dt_run["rc"]:
            raise SystemExit(f"datatrove failed: {dt_run['stderr'][-3000:]}")
        dt = json.loads(dt_run["stdout"].strip().splitlines()[-1])
        dt["peak_rss_mb"] = max(dt_run["peak_rss_mb"].values())
    body = report(tm, dt, info, args, load, before)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)
    return 0


def train_model(shared: Path, work: Path) -> str:
    sys.path.insert(0, str(REPO / "src"))
    from quality import reference_sets
    from tokenmill.curate.quality.classifier import train_quality

    pos, neg = reference_sets(shared, work / "q")
    return train_quality(pos, neg, out=work / "quality.bin").model


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
