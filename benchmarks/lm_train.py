"""``tokenmill lm train`` and the perplexity step beside KenLM, on the real text of ../shared/data.

KenLM's estimator (``lmplz``) is not in the ``kenlm`` package on PyPI (it ships only the query module), so
training is measured alone: wall and CPU seconds, the process tree's peak memory, at 1x and 4x the reference
(the 4x input is the same text four times: the text grows, its distinct n-grams do not) and at 1 and 2
workers. Against KenLM's query module, on the same ARPA file: the load time, words scored per second, and
the agreement of the log10 probability of every sentence.

The selection figure: a pool of Common Crawl documents with held-out Wikipedia articles mixed in at a known
rate, every document's perplexity under a model of other Wikipedia text; the share of Wikipedia articles
in CCNet's head bucket (below the pool's 30th percentile) and among the lowest-perplexity N (N = the
articles mixed in), against the rate in the pool.

    python benchmarks/lm_train.py [--shared ../shared/data] [--write]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, compile_sources, machine, run_per_process, update_section  # noqa: E402
from tokenmill.curate.select.perplexity import perplexities  # noqa: E402
from tokenmill.lm.model import NgramModel  # noqa: E402
from tokenmill.lm.normalize import sentences  # noqa: E402

HEADING = "N-gram language model: lm train, the perplexity step and KenLM"
TITLE = re.compile(r"^ = [^=].* = $")


def wikitext_articles(path: Path) -> list[str]:
    """WikiText-2's articles (a line `` = Title = `` starts one), each its lines joined by newlines."""
    articles: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if TITLE.match(line):
            articles.append([])
        if articles and line.strip():
            articles[-1].append(line.strip())
    return ["\n".join(a) for a in articles if len(a) > 2]


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def web_documents(shared: Path) -> list[str]:
    path = next((shared / "curation" / "cc_text").glob("*.jsonl.gz"))
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def train(refs: list[Path], out: Path, workers: int, prune: tuple[str, ...] = ()) -> dict:
    cmd = [sys.executable, "-m", "tokenmill.cli", "lm", "train", "--text", *map(str, refs), "--out", str(out),
           "--workers", str(workers), "--no-progress", "--overwrite", *(("--prune", *prune) if prune else ())]
    got = run_per_process(cmd, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    if got["rc"] != 0:
        raise SystemExit(got["stderr"])
    m = json.loads((out / "manifest.json").read_text())
    return {"wall_s": got["wall_s"], "cpu_s": got["cpu_s"], "peak_rss_mb": max(got["peak_rss_mb"].values()),
            "mb_in": m["counts"]["bytes_in"] / 1e6, "words": m["counts"]["tokens"],
            "ngrams": m["model"]["ngrams"], "counted": m["model"]["ngrams_counted"],
            "arpa_mb": m["model"]["bytes"]["model.arpa"] / 1e6, "binary_mb": m["model"]["bytes"]["model.tmlm"] / 1e6}


def query(out: Path, held: list[list[str]]) -> dict:
    import kenlm

    t0 = time.perf_counter()
    model = NgramModel(out / "model.tmlm")
    ours_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = model.score(held)
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ken = kenlm.Model(str(out / "model.arpa"))
    ken_load = time.perf_counter() - t0
    lines = [" ".join(s) for s in held]
    t0 = time.perf_counter()
    theirs = np.array([ken.score(line) for line in lines])
    ken_s = time.perf_counter() - t0
    summed = np.array([sum(p for p, _, _ in ken.full_scores(line)) for line in lines])
    words = sum(len(s) + 1 for s in held)
    return {"sentences": len(held), "words": words, "ours_load_s": ours_load, "ken_load_s": ken_load,
            "ours_wps": words / ours_s, "ken_wps": words / ken_s,
            "max_diff_score": float(np.abs(ours - theirs).max()),
            "within_1e4_score": float(np.mean(np.abs(ours - theirs) <= 1e-4)),
            "max_diff_words": float(np.abs(ours - summed).max())}


def selection(out: Path, web: list[str], wiki: list[str]) -> dict:
    pool = web + wiki
    is_wiki = np.array([False] * len(web) + [True] * len(wiki))
    t0 = time.perf_counter()
    ppl = perplexities(NgramModel(out / "model.tmlm"), pool)
    seconds = time.perf_counter() - t0
    head = ppl < np.percentile(ppl, 30)
    top = np.argsort(ppl, kind="stable")[:len(wiki)]
    return {"pool": len(pool), "wiki": len(wiki), "rate": float(is_wiki.mean()),
            "head_share": float(is_wiki[head].mean()), "head_recall": float(is_wiki[head].sum() / len(wiki)),
            "top_n_share": float(is_wiki[top].mean()), "docs_per_s": len(pool) / seconds,
            "median_ppl_web": float(np.median(ppl[~is_wiki])), "median_ppl_wiki": float(np.median(ppl[is_wiki]))}


def _memory_line(trains: dict[str, dict]) -> str:
    one, four = trains["1x, 2 workers, `--prune 0`"], trains["4x, 2 workers, `--prune 0`"]
    return (f"The same n-grams kept, 4x the text takes {four['peak_rss_mb'] / one['peak_rss_mb']:.2f}x the memory "
            f"({one['peak_rss_mb']:.0f} -> {four['peak_rss_mb']:.0f} MB) and {four['cpu_s'] / one['cpu_s']:.2f}x the CPU: "
            "memory follows the model, not the text.")


def render(trains: list[tuple[str, dict]], q: dict, sel: dict) -> str:
    rows = "\n".join(
        f"| {tag} | {t['mb_in']:.1f} | {t['words']:,} | {t['wall_s']:.1f} | {t['cpu_s']:.1f} | {t['peak_rss_mb']:.0f} | "
        f"{' / '.join(f'{n:,}' for n in t['ngrams'])} | {t['arpa_mb']:.1f} / {t['binary_mb']:.1f} |"
        for tag, t in trains)
    return f"""`python benchmarks/lm_train.py` (data: `../shared/data`). {machine()}.

KenLM's estimator `lmplz` is not in the `kenlm` package on PyPI (0.3.0 ships the query module only, and
compiles KenLM's C++ on install: about 2.5 minutes here), so training is measured alone; the query module
reads tokenmill's ARPA file and is compared on it. Reference: `llamafactory_wiki_demo.txt` and the first
70% of WikiText-2's test articles; a 5-gram model with the default pruning (`--prune 0 0 1`). "4x" is the
same text four times (the text grows, its distinct n-grams do not; every count is at least 4, so the
default pruning drops none: with `--prune 0` both keep the same n-grams, and the memory of 1x and 4x
compare). CPU: user + system seconds of every process of the run; memory: the peak RSS of its largest
process (the driver, a counting worker or the build); both polled every 0.1 s, so a process's last 0.1 s can
be missed. Wall clock on a machine shared with other jobs (load average {os.getloadavg()[0]:.1f} at the end of
the run): read the CPU seconds.

| run | MB in | words | wall s | CPU s | peak RSS MB (largest process) | n-grams kept, orders 1-5 | ARPA / binary MB |
|---|---|---|---|---|---|---|---|
{rows}

{_memory_line(dict(trains))}

Query, on the same ARPA file, {q['sentences']:,} sentences ({q['words']:,} words and `</s>`) of Common Crawl text
(`curation/cc_text`): tokenmill (the binary form, numpy-vectorised over all sentences at once) scores
{q['ours_wps']:,.0f} words/s after a {q['ours_load_s']:.2f} s load; KenLM's `Model.score`, one call per
sentence, {q['ken_wps']:,.0f} words/s after a {q['ken_load_s']:.2f} s ARPA load. Agreement: tokenmill's log10
p per sentence is within {q['max_diff_words']:.1e} of KenLM's word scores summed in float64, and within 1e-4
of `Model.score` on {q['within_1e4_score']:.1%} of the sentences (largest gap {q['max_diff_score']:.1e}: KenLM
adds its word scores in float32, which on a long sentence drifts by more).

Selection: {sel['pool']:,} documents, {sel['wiki']} of them held-out WikiText-2 articles ({sel['rate']:.1%}),
the rest Common Crawl. Median perplexity {sel['median_ppl_wiki']:,.0f} (Wikipedia) vs
{sel['median_ppl_web']:,.0f} (web). CCNet's head bucket (below the pool's 30th percentile) is
{sel['head_share']:.1%} Wikipedia and holds {sel['head_recall']:.1%} of the articles; the {sel['wiki']}
lowest-perplexity documents are {sel['top_n_share']:.1%} Wikipedia. Scoring: {sel['docs_per_s']:,.0f}
documents/s on one process.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--write", action="store_true", help="update the section of BENCHMARKS.md")
    args = ap.parse_args()
    compile_sources()
    shared = Path(args.shared)
    articles = wikitext_articles(shared / "curation" / "quality" / "wikitext2_test_tokenized.txt")
    cut = int(len(articles) * 0.7)
    with tempfile.TemporaryDirectory(prefix="lm-bench-") as tmp:
        work = Path(tmp)
        ref = [shared / "pretrain" / "llamafactory_wiki_demo.txt", write_jsonl(work / "wikitext.jsonl", articles[:cut])]
        copies = []
        for i in range(4):
            copies += [write_jsonl(work / f"copy{i}-wiki.jsonl", articles[:cut]),
                       work / f"copy{i}-demo.txt"]
            copies[-1].write_bytes(ref[0].read_bytes())
        trains = [("1x, 1 worker", train(ref, work / "lm1", 1)), ("1x, 2 workers", train(ref, work / "lm2", 2)),
                  ("4x, 2 workers", train(copies, work / "lm4", 2)),
                  ("1x, 2 workers, `--prune 0`", train(ref, work / "lm1p", 2, ("0",))),
                  ("4x, 2 workers, `--prune 0`", train(copies, work / "lm4p", 2, ("0",)))]
        web = web_documents(shared)
        held = [s for doc in web for s in sentences(doc)]
        q = query(work / "lm2", held)
        sel = selection(work / "lm2", web, articles[cut:])
    body = render(trains, q, sel)
    print(body)
    if args.write:
        update_section(HEADING, body)


if __name__ == "__main__":
    main()
