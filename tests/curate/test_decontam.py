"""Decontamination: every planted eval item found and named, a clean set untouched, every eval layout read."""

from __future__ import annotations

import csv
import json
import pickle
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.curate import ngrams
from tokenmill.curate.decontam.step import Decontaminate, build_index
from tokenmill.steps.registry import step_class

WORDS = ("river mountain village engine garden planet signal harbor winter copper lantern meadow "
         "thunder orchard marble canyon violet ember falcon glacier").split()


def _sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


@pytest.fixture()
def evals(tmp_path):
    rng = random.Random(7)
    d = tmp_path / "eval"
    d.mkdir()
    gsm = [{"question": _sentence(rng, 25), "answer": "#### 4"} for _ in range(20)]
    (d / "gsm8k_test.jsonl").write_text("\n".join(json.dumps(r) for r in gsm) + "\n")
    math = [{"problem": _sentence(rng, 18), "solution": "\\boxed{2}"} for _ in range(10)]
    (d / "math500_test.json").write_text(json.dumps(math))
    mmlu = d / "mmlu"
    mmlu.mkdir()
    rows = [[_sentence(rng, 9), "alpha", "beta", "gamma", "delta", "A"] for _ in range(10)]
    with open(mmlu / "anatomy_test.csv", "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    he = [{"task_id": f"H/{i}", "prompt": f"def f{i}(x):\n    '''{_sentence(rng, 20)}'''\n"} for i in range(5)]
    pq.write_table(pa.Table.from_pylist(he), d / "humaneval.parquet")
    return {"dir": d, "gsm": gsm, "math": math, "mmlu": rows, "he": he,
            "paths": [str(d / "gsm8k_test.jsonl"), str(d / "math500_test.json"), str(mmlu), str(d / "humaneval.parquet")]}


def _batch(texts):
    return pa.record_batch({"text": pa.array(texts, type=pa.large_string())})


def test_every_planted_item_is_found_and_named(evals):
    step = Decontaminate(eval=evals["paths"])
    rng = random.Random(1)
    planted = ([("gsm8k_test", r["question"]) for r in evals["gsm"]] + [("math500_test", r["problem"]) for r in evals["math"]]
               + [("mmlu", " ".join(r[:5])) for r in evals["mmlu"]] + [("humaneval", r["prompt"]) for r in evals["he"]])
    texts = [f"Intro text here. {body.upper()}   Some other words follow, {_sentence(rng, 6)}" for _, body in planted]
    scores = step.score(_batch(texts)).scores
    assert list(step.decide(scores)) == [name for name, _ in planted]


def test_a_clean_set_is_untouched(evals):
    step = Decontaminate(eval=evals["paths"])
    rng = random.Random(2)
    texts = [_sentence(rng, 60) for _ in range(200)]  # same vocabulary, different sequences
    assert all(r is None for r in step.decide(step.score(_batch(texts)).scores))


def test_short_items_are_matched_whole(evals):
    step = Decontaminate(eval=evals["paths"], min_words=8)
    q = evals["mmlu"][0][0]  # a 9-word question: shorter than a 13-gram
    only_question = [f"As asked before: {q} Nothing else."]
    assert step.decide(step.score(_batch(only_question)).scores)[0] == "mmlu"
    strict = Decontaminate(eval=evals["paths"], min_words=10)
    assert strict.decide(strict.score(_batch(only_question)).scores)[0] is None


def test_index_counts_items_per_benchmark(evals):
    idx = build_index(evals["paths"], fields=None, ngram=13, min_words=8)
    assert idx.items == {"gsm8k_test": 20, "math500_test": 10, "mmlu": 10, "humaneval": 5}


def test_unknown_layout_asks_for_fields(tmp_path):
    f = tmp_path / "odd.jsonl"
    f.write_text('{"body": "a b c"}\n')
    with pytest.raises(Exception, match="fields"):
        Decontaminate(eval=[str(f)]).setup()
    assert Decontaminate(eval=[str(f)], fields=["body"], min_words=1).index().items == {"odd": 1}


def test_bad_parameters_are_refused(tmp_path):
    with pytest.raises(ValueError, match="eval"):
        Decontaminate(eval=[])
    with pytest.raises(ValueError, match="not found"):
        Decontaminate(eval=[str(tmp_path / "missing.jsonl")])
    with pytest.raises(ValueError, match="ngram"):
        Decontaminate(eval=[str(tmp_path)], ngram=0)


def test_step_pickles_and_is_registered(evals):
    step = Decontaminate(eval=evals["paths"])
    assert pickle.loads(pickle.dumps(step)) == step
    assert step_class("decontaminate") is Decontaminate


def test_ngram_hashes_never_cross_documents():
    w = ngrams.words(["a b c", "d e f"])
    h, doc = ngrams.ngram_hashes(w, 3)
    assert len(h) == 2 and list(doc) == [0, 1]
    whole, lengths = ngrams.whole_hashes(w)
    assert list(lengths) == [3, 3] and np.array_equal(whole, h)


def test_real_eval_sets_are_indexed(shared_data):
    ev = shared_data / "eval"
    step = Decontaminate(eval=[str(ev / "gsm8k_test.jsonl"), str(ev / "math500_test.json"),
                               str(ev / "HumanEval.jsonl"), str(ev / "mmlu_test")])
    idx = step.index()
    assert idx.items["gsm8k_test"] == 1319 and idx.items["HumanEval"] == 164 and idx.items["mmlu_test"] > 10_000
    q = json.loads((ev / "gsm8k_test.jsonl").read_text().splitlines()[3])["question"]
    assert step.decide(step.score(_batch([f"Homework help: {q}"])).scores)[0] == "gsm8k_test"
