"""Quality classifier: accuracy and AUC of tokenmill's default training settings (and of fastText's own
defaults, side by side) on the real data in ../shared/data, and documents per second when scoring.

(a) trained on reference positives (inaugural addresses, State of the Union, OpenStax Anatomy, WikiText-2)
    and raw-web negatives (Common Crawl text, C4, NLTK webtext), evaluated on DCLM's human-labelled file
    (never trained on);
(b) 5-fold cross-validation on the labelled file itself.

    python benchmarks/quality.py [--shared ../shared/data] [--grid]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenmill.bench.corpus import read_labelled, read_texts  # noqa: E402
from tokenmill.curate.quality.classifier import DEFAULTS, evaluate, load_model, predict_hq, train_quality  # noqa: E402

FASTTEXT_DEFAULTS = {"wordNgrams": 1, "dim": 100, "epoch": 5, "lr": 0.1, "minCount": 1, "loss": "softmax",
                     "bucket": 2_000_000}


def reference_sets(shared: Path, work: Path) -> tuple[list[str], list[str]]:
    q = shared / "curation" / "quality"
    for z in ("nltk_inaugural.zip", "nltk_state_union.zip", "nltk_webtext.zip"):
        with zipfile.ZipFile(q / z) as zf:
            zf.extractall(work)
    pos_paths = [str(work / "inaugural"), str(work / "state_union"), str(q / "openstax_anatomy")]
    pos = read_texts(pos_paths, text_mode="file")
    wiki = read_texts([str(q / "wikitext2_test_tokenized.txt")], text_mode="paragraph")
    pos += wiki
    neg = read_texts([str(shared / "curation" / "cc_text"), str(shared / "pretrain" / "llamafactory_c4_demo.jsonl")])
    web = read_texts([str(work / "webtext")], text_mode="file")
    return pos, neg + web


def labelled(shared: Path) -> tuple[list[str], np.ndarray]:
    texts, labels = read_labelled([str(shared / "pretrain" / "dclm_quality_agreement_data.jsonl")], label="label")
    return texts, np.asarray(labels, dtype=bool)


def run(params: dict, pos, neg, eval_texts, eval_labels, work: Path, tag: str) -> dict:
    model = work / f"{tag}.bin"
    t0 = time.perf_counter()
    train_quality(pos, neg, out=model, params=params)
    train_s = time.perf_counter() - t0
    m = load_model(str(model))
    t0 = time.perf_counter()
    res = evaluate(m, eval_texts, list(eval_labels))
    score_s = time.perf_counter() - t0
    res.update({"train_s": round(train_s, 2), "docs_per_s": round(len(eval_texts) / score_s)})
    return res


def cross_validate(params: dict, texts, labels, work: Path, folds: int = 5) -> dict:
    idx = np.arange(len(texts))
    rng = np.random.default_rng(0)
    rng.shuffle(idx)
    scores = np.zeros(len(texts), dtype=np.float64)
    for k in range(folds):
        test = idx[k::folds]
        train = np.setdiff1d(idx, test)
        pos = [texts[i] for i in train if labels[i]]
        neg = [texts[i] for i in train if not labels[i]]
        model = work / f"cv{k}.bin"
        train_quality(pos, neg, out=model, params=params, holdout=1 << 30)
        from tokenmill.curate.quality import classifier as q

        q._MODELS.pop(str(model), None)
        scores[test] = predict_hq(load_model(str(model)), [texts[i] for i in test])
    from tokenmill.curate.quality.classifier import auc

    return {"accuracy": round(float(((scores >= 0.5) == labels).mean()), 4), "auc": round(auc(scores, labels), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--grid", action="store_true", help="also try a small grid of settings")
    args = ap.parse_args()
    shared = Path(args.shared)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pos, neg = reference_sets(shared, work)
        ev_t, ev_y = labelled(shared)
        print(f"reference: {len(pos)} positive, {len(neg)} negative documents; labelled eval: {len(ev_t)} "
              f"({int(ev_y.sum())} high quality)")
        settings = {"tokenmill defaults": DEFAULTS, "fastText defaults": FASTTEXT_DEFAULTS}
        if args.grid:
            for ng in (1, 2, 3):
                for ep in (5, 25, 50):
                    for lr in (0.1, 0.5, 1.0):
                        settings[f"ng{ng} ep{ep} lr{lr}"] = {**DEFAULTS, "wordNgrams": ng, "epoch": ep, "lr": lr}
        rows = []
        for name, params in settings.items():
            a = run(params, pos, neg, ev_t, ev_y, work, name.replace(" ", "_"))
            b = cross_validate(params, ev_t, ev_y, work)
            rows.append((name, a, b))
            print(json.dumps({"setting": name, "reference->dclm": a, "dclm 5-fold": b}), flush=True)
        print("\n| setting | (a) accuracy | (a) AUC | (b) 5-fold accuracy | (b) AUC | scoring docs/s |")
        print("|---|---|---|---|---|---|")
        for name, a, b in rows:
            print(f"| {name} | {a['accuracy']:.3f} | {a['auc']:.3f} | {b['accuracy']:.3f} | {b['auc']:.3f} | "
                  f"{a['docs_per_s']:,} |")


if __name__ == "__main__":
    main()
