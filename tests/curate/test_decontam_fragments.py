"""A document that shares only a short fragment of an eval item is clean. An n-gram is ``ngram`` words of the
text as written: ``37.5°C (99.5°F), pulse 110/min`` is five words, not the eleven pieces its punctuation cuts it
into, so an 8-word fragment of a formula-laden problem is never a 13-gram match. Whole items, and 13 words of
them, are still found (hermetic tier with generated items; the real-data tier with the shared eval sets)."""

from __future__ import annotations

import csv
import json
import random

import pyarrow as pa
import pytest

from tokenmill.curate.decontam.step import Decontaminate

FILLER = ("The council met on Tuesday to discuss the budget for the coming year and members argued at length "
          "about the cost of repairing the old bridge over the river while residents waited outside").split()


def _batch(texts):
    return pa.record_batch({"text": pa.array(texts, type=pa.large_string())})


def _embed(fragment: str, rng: random.Random) -> str:
    at = rng.randrange(3, len(FILLER) - 3)
    return " ".join(FILLER[:at]) + " " + fragment + " " + " ".join(FILLER[at:])


def _fragments(items: list[str], rng: random.Random, n: int = 60, words: int = 8) -> list[str]:
    long = [t.split() for t in items if len(t.split()) >= words + 12]
    out = []
    for _ in range(n):
        w = rng.choice(long)
        k = rng.randrange(0, len(w) - words)
        out.append(" ".join(w[k : k + words]))
    return out


def _clinical(i: int, rng: random.Random) -> str:
    return (f"A {30 + i}-year-old man has a temperature of 3{i % 10}.{i % 7}°C (9{i % 10}.{i % 5}°F), pulse "
            f"1{i:02d}/min, respirations {10 + i % 9}/min, and blood pressure 1{i % 4}0/{60 + i % 30} mm Hg; "
            f"x-ray shows a {rng.choice(['left', 'right'])}-sided effusion (3.{i % 9} cm). What is the most "
            f"likely diagnosis of case {i}?")


@pytest.fixture()
def generated(tmp_path):
    rng = random.Random(5)
    items = [{"question": _clinical(i, rng), "answer": "#### 1"} for i in range(40)]
    path = tmp_path / "clinical_test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in items))
    return str(path), [r["question"] for r in items]


def test_fragments_of_generated_items_are_clean_whole_items_are_not(generated):
    path, items = generated
    rng = random.Random(0)
    step = Decontaminate(eval=[path], ngram=13)
    fragments = [_embed(f, rng) for f in _fragments(items, rng)]
    assert [r for r in step.decide(step.score(_batch(fragments)).scores) if r] == []
    whole = [_embed(q, rng) for q in items[:10]] + [_embed(" ".join(q.split()[2:15]), rng) for q in items[10:20]]
    assert list(step.decide(step.score(_batch(whole)).scores)) == ["clinical_test"] * 20


def _real_items(shared):
    ev = shared / "eval"
    math = [r["problem"] for r in json.loads((ev / "math500_test.json").read_text())]
    mmlu = [r[0] for f in sorted((ev / "mmlu_test").glob("*.csv")) for r in csv.reader(f.open(encoding="utf-8"))]
    gsm = [json.loads(line)["question"] for line in (ev / "gsm8k_test.jsonl").read_text().splitlines()]
    paths = [str(ev / "gsm8k_test.jsonl"), str(ev / "math500_test.json"), str(ev / "HumanEval.jsonl"),
             str(ev / "mmlu_test")]
    return paths, math, mmlu, gsm


@pytest.mark.realdata
def test_fragments_of_real_eval_items_are_clean(shared_data):
    paths, math, mmlu, gsm = _real_items(shared_data)
    step = Decontaminate(eval=paths, ngram=13)
    removed = 0
    for seed in range(6):  # 360 documents, each with an 8-word fragment of a real MATH or MMLU problem
        rng = random.Random(seed)
        docs = [_embed(f, rng) for f in _fragments(math + mmlu, rng)]
        removed += sum(r is not None for r in step.decide(step.score(_batch(docs)).scores))
    assert removed == 0
    rng = random.Random(9)
    planted = [_embed(q, rng) for q in rng.sample([t for t in math if len(t.split()) >= 13], 20)]
    planted += [_embed(q, rng) for q in rng.sample(gsm, 20)]
    assert all(r is not None for r in step.decide(step.score(_batch(planted)).scores))


def test_word_spans_are_the_ngram_hashes_of_their_pieces():
    import numpy as np

    from tokenmill.curate import ngrams

    plain = ["a b c d e", "f g h"]
    spans, doc = ngrams.span_hashes(ngrams.word_pieces(plain), 3)
    grams, gdoc = ngrams.ngram_hashes(ngrams.words(plain), 3)
    assert np.array_equal(spans, grams) and list(doc) == list(gdoc) == [0, 0, 0, 1]
    w = ngrams.word_pieces(["37.5°C (99.5°F), pulse + 110/min", "", "+ ="])
    assert list(np.diff(w.offsets)) == [4, 0, 0]  # words with no piece (a lone "+") are left out
    whole, words, pieces = ngrams.whole_spans(w)
    assert list(words) == [4, 0, 0] and list(pieces) == [9, 0, 0]
    assert whole[0] == ngrams.whole_hashes(ngrams.words(["37.5°C (99.5°F), pulse + 110/min"]))[0][0]
