"""``tokenmill select`` (the dsir step) side by side with the ``data-selection`` package (DSIR's authors' code).

    PYTHONPATH=src python benchmarks/dsir.py [--shared ../shared/data] [--mb 20 100] [--skip-speed] [--skip-quality]
                                            [--baseline OTHER_CHECKOUT/src] [--skip-package]

Speed and memory: real web text (``curation/cc_text``, ``pretrain``'s C4 demo and Dolma CC heads) resampled
with replacement to each size (``tokenmill.bench.corpus.resample``), WikiText-2 (Wikipedia) as the target,
``--n`` a tenth of the documents. Both run as a child process on one CPU (``--workers 1``; the package with
``num_proc=1``) and are measured by the children's user + system CPU seconds and peak RSS (``getrusage``);
data-selection's run is fit (every token: ``num_tokens_to_fit="all"``), weights, resample. The resampled
corpus repeats each real document many times, which favours tokenmill's hashing of each batch's distinct
n-grams once: the first row (``real``, the unrepeated documents) is the fair one for that.

Selection quality: a pool of the real web documents with Wikipedia documents mixed in at a known rate
(``pretrain/llamafactory_wiki_demo.txt``: 30 English Wikipedia articles cut into documents of about 2,000
characters), and the share of the drawn N (N = the Wikipedia documents mixed in) that are Wikipedia, for
DSIR with WikiText-2 as the target (another Wikipedia text: no document is in both; with the package's
``min_words`` of 100, and with none), the ``quality``
classifier (trained by ``tokenmill quality train`` on OpenStax vs NLTK web text, as the curation tests do;
its top N by score), and random draws.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.bench.corpus import resample

WEB = ("pretrain/llamafactory_c4_demo.jsonl", "pretrain/dolma_cc_en_head-0091.jsonl",
       "pretrain/dolma_cc_en_head-0174.jsonl")
CC = "curation/cc_text/dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"


def web_texts(shared: Path) -> list[str]:
    texts = []
    with gzip.open(shared / CC, "rt", encoding="utf-8") as fh:
        texts += [json.loads(line)["text"] for line in fh]
    for rel in WEB:
        texts += [json.loads(line).get("text") for line in (shared / rel).open(encoding="utf-8")]
    return [t for t in texts if isinstance(t, str) and t.strip()]


def wikitext(shared: Path) -> list[str]:
    lines = (shared / "curation/quality/wikitext2_test_tokenized.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip()]


def wiki_documents(shared: Path, chars: int = 2_000) -> list[str]:
    """The Wikipedia articles cut at sentence ends into documents of about ``chars`` characters."""
    docs = []
    for article in (shared / "pretrain/llamafactory_wiki_demo.txt").read_text(encoding="utf-8").splitlines():
        piece = ""
        for sentence in article.replace(". ", ".\n").splitlines():
            piece += sentence + " "
            if len(piece) >= chars:
                docs.append(piece.strip())
                piece = ""
    return docs


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


# CPU: the process and its children (getrusage). Peak RSS: the largest process of the tree, each at its
# high-water mark: the process's own (VmHWM: ru_maxrss would start from the benchmark's own RSS at the fork),
# its children's (ru_maxrss of RUSAGE_CHILDREN: the largest one that ended) and, for tokenmill, its workers'
# as the manifest records.
USAGE = ("\nimport json, resource, glob\nu = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]\n"
         "hwm = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')) / 1024\n"
         "workers = [json.load(open(m))['run']['peak_rss']['largest_worker_mb'] for m in glob.glob(MANIFEST)]\n"
         "print(json.dumps([sum(x.ru_utime + x.ru_stime for x in u), max([hwm, u[1].ru_maxrss / 1024, *workers])]))\n")


def child(code: str, manifest: str = "") -> tuple[float, float, float]:
    """Run ``code`` in a fresh interpreter: (CPU seconds, wall seconds, peak RSS MB of the largest process) of
    it and its children, as the child itself reads them at its end."""
    started = time.perf_counter()
    usage = USAGE.replace("MANIFEST", repr(manifest))
    done = subprocess.run([sys.executable, "-c", code + usage], check=True, capture_output=True, text=True)
    cpu, rss = json.loads(done.stdout.strip().splitlines()[-1])
    return cpu, time.perf_counter() - started, rss


def run_tokenmill(raw: Path, ref: Path, out: Path, n: int, src: str = "") -> str:
    """The child's code; ``src`` puts another checkout's ``src`` first (a before/after in the same run)."""
    args = ["select", "--target", str(ref), "--from", str(raw), "--n", str(n), "--out", str(out), "--workers", "1",
            "--no-progress", "--overwrite"]
    first = f"import sys; sys.path.insert(0, {src!r})\n" if src else ""
    return first + f"from tokenmill.cli import main; assert main({args!r}) == 0"


def run_package(raw: Path, ref: Path, out: Path, n: int) -> str:
    return ("import numpy as np; from data_selection import HashedNgramDSIR\n"
            f"d = HashedNgramDSIR([{str(raw)!r}], [{str(ref)!r}], cache_dir={str(out / 'cache')!r}, num_proc=1)\n"
            "d.fit_importance_estimator(num_tokens_to_fit='all'); d.compute_importance_weights()\n"
            f"np.random.seed(0); d.resample(out_dir={str(out / 'drawn')!r}, num_to_sample={n}, "
            f"cache_dir={str(out / 'resample')!r})\n")


def speed(shared: Path, sizes: list[float], work: Path, baseline: str = "", package: bool = True) -> None:
    web, ref = web_texts(shared), write_jsonl(work / "ref.jsonl", wikitext(shared))
    before = "| tokenmill before CPU s | tokenmill before peak RSS MB " if baseline else "| "
    print(f"| corpus | documents {before}| tokenmill CPU s | data-selection CPU s | CPU ratio | tokenmill peak RSS MB "
          "| data-selection peak RSS MB |\n|---|---|" + "---|---|" * bool(baseline) + "---|---|---|---|---|")
    for mb in [None, *sizes]:
        texts = web if mb is None else resample(web, mb=mb, seed=0)
        raw = write_jsonl(work / "raw.jsonl", texts)
        n = len(texts) // 10
        size = raw.stat().st_size / 1e6
        manifest = str(work / "ours" / "manifest.json")
        old = child(run_tokenmill(raw, ref, work / "ours", n, baseline), manifest) if baseline else None
        ours = child(run_tokenmill(raw, ref, work / "ours", n), manifest)
        theirs = child(run_package(raw, ref, work / f"theirs-{mb}", n)) if package else (math.nan, 0.0, math.nan)
        label = f"real, {size:.1f} MB" if mb is None else f"resampled, {size:.0f} MB"
        was = f"| {old[0]:.1f} | {old[2]:.0f} " if old else ""
        print(f"| {label} | {len(texts):,} {was}| {ours[0]:.1f} | {theirs[0]:.1f} | {theirs[0] / ours[0]:.1f}x "
              f"| {ours[2]:.0f} | {theirs[2]:.0f} |", flush=True)


def quality_model(shared: Path, work: Path) -> str:
    from tokenmill.cli import main

    with zipfile.ZipFile(shared / "curation/quality/nltk_webtext.zip") as zf:
        zf.extractall(work / "neg")
    path = work / "quality.bin"
    main(["quality", "train", "--positive", str(shared / "curation/quality/openstax_anatomy"), "--negative",
          str(work / "neg" / "webtext"), "--text-mode", "file", "--out", str(path), "--overwrite"])
    return str(path)


def selection_quality(shared: Path, work: Path, rates: tuple[float, ...] = (0.02, 0.1)) -> None:
    from tokenmill.curate.quality.classifier import Quality

    web, wiki = web_texts(shared), wiki_documents(shared)
    ref = write_jsonl(work / "ref.jsonl", wikitext(shared))
    scorer = Quality(model=quality_model(shared, work))
    print("| reference-like share of the pool | pool | N drawn | DSIR (min_words 100) | DSIR (min_words 0) "
          "| quality classifier (top N) | perplexity buckets | random |\n|---|---|---|---|---|---|---|---|")
    for rate in rates:
        k = round(rate * len(web) / (1 - rate))
        mixed = [(t, False) for t in web] + [(t, True) for t in random.Random(0).sample(wiki, min(k, len(wiki)))]
        random.Random(1).shuffle(mixed)
        raw = write_jsonl(work / "pool.jsonl", [t for t, _ in mixed])
        truth = {t: is_wiki for t, is_wiki in mixed}
        n = sum(truth.values())
        drawn = [dsir_draw(raw, ref, n, min_words, work) for min_words in (100, 0)]
        texts = [t for t, _ in mixed]
        s = np.asarray(scorer.score(pa.record_batch({"text": pa.array(texts, pa.large_string())})).scores["score"])
        top = [texts[i] for i in np.argsort(-s, kind="stable")[:n]]
        print(f"| {n / len(mixed):.1%} | {len(mixed):,} | {n} | {_share(drawn[0], truth):.1%} "
              f"| {_share(drawn[1], truth):.1%} | {_share(top, truth):.1%} "
              f"| (lm train) | {n / len(mixed):.1%} |", flush=True)


def dsir_draw(raw: Path, ref: Path, n: int, min_words: int, work: Path) -> list[str]:
    from tokenmill.curate.workflows.curate import run_curate

    step = {"name": "dsir", "target": str(ref), "n": n, "min_words": min_words}
    run_curate([str(raw)], out=work / "pool-out", steps=[step], overwrite=True, progress=False, report=False)
    return pq.read_table(work / "pool-out" / "documents").column("text").to_pylist()


def _share(drawn: list[str], truth: dict[str, bool]) -> float:
    return sum(truth[t] for t in drawn) / max(len(drawn), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--mb", type=float, nargs="*", default=[20.0, 100.0])
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--baseline", default="", help="another checkout's src, run beside this one (before/after)")
    ap.add_argument("--skip-package", action="store_true", help="tokenmill alone (sizes the package takes too long on)")
    args = ap.parse_args()
    shared = Path(args.shared)
    with tempfile.TemporaryDirectory(prefix="dsir-bench-") as tmp:
        if not args.skip_quality:
            selection_quality(shared, Path(tmp))
        if not args.skip_speed:
            speed(shared, args.mb, Path(tmp), args.baseline, not args.skip_package)


if __name__ == "__main__":
    main()
