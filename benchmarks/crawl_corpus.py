"""Real crawl text resampled to a target size, every copy with fresh edits: the input of the scale benchmarks.

    python benchmarks/crawl_corpus.py OUT.jsonl --mb 250 [--shared ../shared/data] [--seed 0]

The base documents are the real web pages of ``../shared/data`` (``curation/cc_text/``, the Common Crawl
documents of ``pretrain/``: dolma cc_en_head, the DCLM agreement pages, the C4 demo). Each output document
is a base document drawn with replacement and edited so the corpus is not 99% duplicates:

- 10% are exact copies (exact dedup's share);
- 10% are light edits, one word in 200 replaced (near-copies: MinHash at Jaccard 0.8 finds them);
- the rest are fresh edits, one word in 8 replaced by a word drawn from the whole corpus's vocabulary
  (by frequency) and its paragraphs rotated, so two fresh copies of one page share few word 5-grams.

Every line is ``{"id", "text", "url"}``: the page's own URL where the source has one, else a made-up
``https://site<k>.example.org/...``. The output is deterministic for a seed and size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

WEB = ["curation/cc_text/dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz",
       "pretrain/dolma_cc_en_head-0091.jsonl", "pretrain/dolma_cc_en_head-0174.jsonl",
       "pretrain/dclm_quality_agreement_data.jsonl", "pretrain/llamafactory_c4_demo.jsonl",
       "pretrain/dolma_provided_documents_000.json.gz"]
MB = 1_000_000


def base_documents(shared: Path) -> list[tuple[str, str]]:
    """(text, url) of every real web document in ``shared``."""
    docs = []
    for name in WEB:
        path = shared / name
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    rec = json.loads(line)
                    rid = str(rec.get("id", ""))
                    url = (rec.get("metadata") or {}).get("url") or (rid if rid.startswith("http") else "")
                    if rec.get("text", "").strip():
                        docs.append((rec["text"], url or ""))
    return docs


def _edit(text: str, rng: np.random.Generator, vocab: np.ndarray, cdf: np.ndarray, rate: float, rotate: bool) -> str:
    paras = text.split("\n")
    if rotate and len(paras) > 1:
        k = int(rng.integers(1, len(paras)))
        paras = paras[k:] + paras[:k]
    out = []
    for para in paras:
        words = para.split(" ")
        hits = np.flatnonzero(rng.random(len(words)) < rate)
        if len(hits):
            picks = vocab[np.searchsorted(cdf, rng.random(len(hits)))]
            for i, w in zip(hits, picks):
                words[i] = w
        out.append(" ".join(words))
    return "\n".join(out)


def _vocabulary(docs: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    counts: dict[str, int] = {}
    for text, _ in docs:
        for w in text.split():
            counts[w] = counts.get(w, 0) + 1
    words = np.array(list(counts), dtype=object)
    cdf = np.cumsum(np.array(list(counts.values()), dtype=np.float64))
    return words, cdf / cdf[-1]


def write_corpus(out: Path, *, shared: Path, mb: float, seed: int = 0) -> dict:
    """Write ``mb`` MB of edited crawl documents to ``out`` (JSONL); return counts."""
    docs = base_documents(shared)
    vocab, cdf = _vocabulary(docs)
    rng = np.random.default_rng(seed)
    total, n = 0, 0
    target = int(mb * MB)
    with open(out, "w", encoding="utf-8") as fh:
        while total < target:
            text, url = docs[int(rng.integers(len(docs)))]
            kind = rng.random()
            if kind >= 0.2:
                text = _edit(text, rng, vocab, cdf, 1 / 8, rotate=True)
            elif kind >= 0.1:
                text = _edit(text, rng, vocab, cdf, 1 / 200, rotate=False)
            url = url or f"https://site{int(rng.integers(5000))}.example.org/page/{n}"
            line = json.dumps({"id": f"doc-{n}", "text": text, "url": url}, ensure_ascii=False) + "\n"
            fh.write(line)
            total += len(line.encode("utf-8"))
            n += 1
    return {"docs": n, "bytes": total, "base_docs": len(docs)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out")
    p.add_argument("--mb", type=float, default=250)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    args = p.parse_args(argv)
    print(json.dumps(write_corpus(Path(args.out), shared=Path(args.shared), mb=args.mb, seed=args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
