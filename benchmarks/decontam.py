"""Decontamination throughput: documents per second against every eval set in ../shared/data/eval
(GSM8K test, MATH-500, HumanEval, MMLU test), on real web documents, one process.

    python benchmarks/decontam.py [--shared ../shared/data] [--mb 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenmill.bench.corpus import read_texts  # noqa: E402
from tokenmill.curate.decontam.step import Decontaminate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--mb", type=float, default=20.0, help="megabytes of documents to scan (resampled)")
    args = ap.parse_args()
    shared = Path(args.shared)
    ev = shared / "eval"
    t0 = time.perf_counter()
    step = Decontaminate(eval=[str(ev / "gsm8k_test.jsonl"), str(ev / "math500_test.json"),
                               str(ev / "HumanEval.jsonl"), str(ev / "mmlu_test")])
    step.setup()
    index_s = time.perf_counter() - t0
    base = read_texts([str(shared / "pretrain" / "llamafactory_c4_demo.jsonl"),
                       str(shared / "curation" / "cc_text")])
    texts, size = [], 0
    while size < args.mb * 1e6:
        for t in base:
            texts.append(t)
            size += len(t.encode())
    found, t0 = 0, time.perf_counter()
    for i in range(0, len(texts), 1024):
        scores = step.score(pa.record_batch({"text": pa.array(texts[i:i + 1024], type=pa.large_string())})).scores
        found += int((scores["matches"] > 0).sum())
    secs = time.perf_counter() - t0
    print(json.dumps({"eval_items": step.index().items, "index_ngrams": int(len(step.index().hashes)),
                      "index_build_s": round(index_s, 2), "documents": len(texts), "mb": round(size / 1e6, 1),
                      "seconds": round(secs, 2), "docs_per_s": round(len(texts) / secs),
                      "mb_per_s": round(size / 1e6 / secs, 2), "contaminated": found}))


if __name__ == "__main__":
    main()
