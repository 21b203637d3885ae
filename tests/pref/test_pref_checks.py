"""pref/checks.py: truncation keeps the prompt's end and the completions' starts; the margin filter; the summary."""

from __future__ import annotations

import json

import numpy as np
import prefkit as pk

from tokenmill.job.options import JobOptions
from tokenmill.pref.checks import Summary, margin_decision, truncate
from tokenmill.pref.inputs import Pair
from tokenmill.pref.run import run_pref
from tokenmill.pref.tokenize import PairProblem, Tokenized


def _t(p, c, r):
    ids = lambda n, base: np.arange(base, base + n, dtype=np.uint32)  # noqa: E731
    return Tokenized("x", ids(p, 0), ids(c, 100), np.ones(c, np.uint8), ids(r, 200), np.ones(r, np.uint8))


def test_truncation_keeps_the_prompts_end_and_the_completions_starts():
    t = truncate(_t(10, 8, 3), max_length=12, max_prompt_length=6)
    assert t.prompt_ids.tolist() == [4, 5, 6, 7, 8, 9]
    assert t.chosen_ids.tolist() == list(range(100, 106)) and len(t.chosen_mask) == 6
    assert t.rejected_ids.tolist() == [200, 201, 202] and t.truncated


def test_a_prompt_filling_max_length_leaves_no_completion():
    got = truncate(_t(10, 8, 3), max_length=10, max_prompt_length=None)
    assert isinstance(got, PairProblem) and got.reason == "completion_truncated_away"
    assert not truncate(_t(4, 2, 2), max_length=10, max_prompt_length=None).truncated


def test_min_margin():
    rated = Pair("a", "text", "p", "c", "r", meta={"chosen_rating": 4, "rejected_rating": 3.5})
    assert margin_decision(rated, None) is None and margin_decision(rated, 0.5) is None
    assert margin_decision(rated, 1) == "margin_below_min"
    assert margin_decision(Pair("b", "text", "p", "c", "r"), 1) == "margin_unrated"


def test_summary_length_bias_and_margins_sum_over_units():
    a, b = Summary(), Summary()
    rated = Pair("a", "text", "p", "c", "r", meta={"chosen_rating": 5, "rejected_rating": 2})
    a.add(rated, _t(4, 8, 4))  # ratio 2
    a.add(rated, _t(4, 6, 3))  # ratio 2
    b.add(Pair("b", "text", "p", "c", "r"), _t(4, 2, 4))  # ratio 0.5
    total = Summary.from_state(json.loads(json.dumps(a.to_state()))) + b
    d = total.to_dict()
    assert d["pairs"] == 3 and d["length_bias"]["chosen_longer_share"] == round(2 / 3, 4)
    assert abs(d["length_bias"]["median_length_ratio"] - 2) < 0.03
    assert d["margin"] == {"rated": 2, "min": 3.0, "median": 3.0, "mean": 3.0, "max": 3.0, "counts": {"3": 2}}
    assert d["tokens"]["stored"] == 12 + 27 and d["tokens"]["without_shared_prompt"] == 12 + 27 + 12


def test_rated_pairs_min_margin_end_to_end(tmp_path):
    rows = [{"prompt": f"q {i}?", "chosen": pk.text(i, 6), "rejected": pk.text(i + 3, 2),
             "chosen-rating": 5, "rejected-rating": 5 - i % 3} for i in range(9)]
    src = tmp_path / "uf.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = run_pref([str(src)], out=tmp_path / "o", tokenizer="default", options=JobOptions(workers=1), min_margin=1)
    assert m["counts"]["filtered"] == {"margin_below_min": 3} and m["counts"]["kept"] == 6
    assert m["report"]["margin"]["counts"] == {"1": 3, "2": 3}
