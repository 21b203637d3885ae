"""The dsir step against the ``data-selection`` package (DSIR's authors' code) on the same input, features and
seed: the same hashed n-gram buckets per document, log importance weights with Spearman >= 0.99, and drawn
sets overlapping >= 0.95 (the two Gumbel draws differ: the package's comes from numpy's global generator,
tokenmill's from a hash of the seed and the document, so only the weights can agree exactly)."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

hashed = pytest.importorskip("data_selection.hashed_ngram_dsir",
                             reason="data-selection is not installed (pip install data-selection)")

from tokenmill.curate.select.features import ngrams  # noqa: E402
from tokenmill.curate.workflows.curate import run_curate  # noqa: E402

ODD = ["Café déjà vu: 120⁰C at 3.88$ — naïve Ⓐ x²+y₂ ½", "中文 文本 和 日本語のテキスト。 emoji 🙂🙂 ok",
       "tab\tsep\u00a0nbsp\u2009thin ZWJ\u200djoin İstanbul ǅ ß ﬁ", "", "one", "Hindi हिन्दी ज़ ि", "a_b __init__ -- ... !!"]


def _ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(np.float64)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])


def test_the_buckets_of_every_document_are_the_packages(tmp_path):
    got = ngrams(ODD)
    for i, text in enumerate(ODD):
        want = hashed.get_ngram_counts(text)
        assert (np.bincount(got.bucket[got.doc == i], minlength=10_000) == want).all(), text


@pytest.mark.realdata
def test_weights_and_draw_agree_with_data_selection_on_real_web_text(shared_data, tmp_path):
    cc = shared_data / "curation" / "cc_text" / "dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
    wiki = shared_data / "curation" / "quality" / "wikitext2_test_tokenized.txt"
    raw, ref = tmp_path / "raw.jsonl", tmp_path / "ref.jsonl"
    with gzip.open(cc, "rt", encoding="utf-8") as fh:
        raw.write_text("".join(json.dumps({"text": json.loads(line)["text"]}) + "\n" for line in fh))
    lines = [line.strip() for line in wiki.read_text(encoding="utf-8").splitlines() if line.strip()]
    ref.write_text("".join(json.dumps({"text": t}) + "\n" for t in lines))
    n = 100

    theirs = hashed.HashedNgramDSIR([str(raw)], [str(ref)], cache_dir=str(tmp_path / "cache"), num_proc=1)
    theirs.fit_importance_estimator(num_tokens_to_fit="all")
    theirs.compute_importance_weights()
    their_weights = np.load(tmp_path / "cache" / "log_importance_weights" / "0.npy")
    np.random.seed(0)
    theirs.resample(out_dir=str(tmp_path / "theirs"), num_to_sample=n, cache_dir=str(tmp_path / "resample"))
    their_drawn = Counter(json.loads(line)["text"] for line in (tmp_path / "theirs" / "0.jsonl").read_text().splitlines())

    run_curate([str(raw)], out=tmp_path / "ours", steps=[{"name": "dsir", "target": str(ref), "n": n}],
               progress=False, report=False)
    ledger = pq.read_table(tmp_path / "ours" / "ledger").sort_by("loc")
    weights = ledger.column("dsir.log_weight").to_pylist()
    assert len(weights) == len(their_weights)
    scored = np.array([w is not None for w in weights])  # blank documents are the reader's rejects here
    assert set(ledger.filter(~scored).column("reason").to_pylist()) == {"rejected:empty_document"}
    assert (their_weights[~scored] == 0).all() and scored.sum() > 600
    our_weights, their_weights = np.asarray([w for w in weights if w is not None]), their_weights[scored]
    np.testing.assert_allclose(our_weights, their_weights, rtol=1e-9, atol=1e-6)
    assert spearman(our_weights, their_weights) >= 0.99
    our_drawn = Counter(pq.read_table(tmp_path / "ours" / "documents").column("text").to_pylist())
    assert our_drawn.total() == their_drawn.total() == n  # a text twice in the input may be drawn twice
    assert (our_drawn & their_drawn).total() / n >= 0.95
