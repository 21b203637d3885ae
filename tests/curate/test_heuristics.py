"""The heuristic steps on the step contract: registry, pickling, bad and empty input, determinism,
decisions recomputed from stored scores, C4 as a modifier."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pyarrow as pa
import pytest

from tokenmill.curate.conformance.cases import prose
from tokenmill.steps.contract import reason, step_fingerprint
from tokenmill.steps.registry import step_class

NAMES = ["length", "gopher_quality", "gopher_repetition", "c4", "fineweb", "refinedweb"]


LARGE = pa.large_string()


def batch(texts, typ=LARGE) -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array([str(i) for i in range(len(texts))]), "text": pa.array(texts, typ)})


TEXTS = ["", None, " ", "\n\n", "中文没有空格的文本。" * 30, prose(12), prose(12) + "\n" + prose(12),
         "- a\n- b\n- c", "{x} lorem ipsum.", "#" * 50, "x" * 5000]


@pytest.mark.parametrize("name", NAMES)
def test_registered_step_scores_decides_and_pickles(name):
    step = step_class(name)()
    assert step.name == name and isinstance(step.version, int)
    clone = pickle.loads(pickle.dumps(step))
    assert clone == step and step_fingerprint(clone) == step_fingerprint(step)
    clone.setup()
    scored = clone.score(batch(TEXTS))
    decisions = clone.decide(scored.scores)
    assert decisions.dtype == object and len(decisions) == len(TEXTS)
    for values in scored.scores.values():
        assert len(values) == len(TEXTS) and np.all(np.isfinite(np.asarray(values, dtype=float)))
    assert all(d is None or isinstance(d, str) for d in decisions)
    assert reason(step, "x") == f"{name}_v{step.version}:x"
    if scored.text is not None:
        assert len(scored.text) == len(TEXTS) and scored.text.null_count == 0


@pytest.mark.parametrize("name", NAMES)
def test_null_text_is_scored_as_empty_and_string_types_agree(name):
    step = step_class(name)()
    a = step.score(batch(["", None]))
    for values in a.scores.values():
        assert np.asarray(values)[0] == np.asarray(values)[1]
    small = step.score(batch(TEXTS, pa.string()))
    large = step.score(batch(TEXTS))
    for key in large.scores:
        np.testing.assert_array_equal(np.asarray(small.scores[key]), np.asarray(large.scores[key]))


@pytest.mark.parametrize("name", NAMES)
def test_scores_do_not_depend_on_the_batch(name):
    step = step_class(name)()
    whole = step.score(batch(TEXTS))
    for i, text in enumerate(TEXTS):
        alone = step.score(batch([text]))
        for key, values in whole.scores.items():
            assert np.asarray(alone.scores[key])[0] == pytest.approx(np.asarray(values)[i]), (key, i)
    again = step.score(batch(TEXTS))
    for key, values in whole.scores.items():
        np.testing.assert_array_equal(np.asarray(values), np.asarray(again.scores[key]))


def test_a_threshold_change_is_decided_from_stored_scores():
    step = step_class("gopher_quality")()
    texts = [prose(8), prose(8) + " the of", " ".join(["kalo", "mine"] * 40) + " the of"]
    scores = step.score(batch(texts)).scores
    loose = dataclasses.replace(step, min_stop_words=3)
    rescored = loose.score(batch(texts)).scores
    for key in scores:
        np.testing.assert_array_equal(scores[key], rescored[key])  # scores ignore thresholds
    assert list(loose.decide(scores)) == list(loose.decide(rescored))
    assert list(step.decide(scores)) != list(loose.decide(scores))


def test_bad_parameters_are_refused_naming_them():
    with pytest.raises(ValueError, match="gopher_quality.min_doc_words"):
        step_class("gopher_quality")(min_doc_words=-1)
    with pytest.raises(ValueError, match="fineweb.line_punct_thr"):
        step_class("fineweb")(line_punct_thr="high")
    with pytest.raises(TypeError, match="c4.filter_policy"):
        step_class("c4")(filter_policy="yes")
    with pytest.raises(ValueError, match="gopher_repetition.top_n_grams"):
        step_class("gopher_repetition")(top_n_grams=[[2]])
    with pytest.raises(TypeError):
        step_class("length")(min_chars=1, unknown=2)
    assert step_class("c4")(min_num_sentences=-1).min_num_sentences is None  # datatrove's "disabled"


def test_c4_rewrites_lines_then_decides_on_what_is_left():
    step = step_class("c4")()
    text = prose(5) + "\nnav bar home about\nPlease enable JavaScript to view.\n  Cited fact here.[1]  "
    scored = step.score(batch([text, prose(3) + "\nThe {set} is here.", prose(3) + "\nbroken {json"]))
    kept = scored.text.to_pylist()
    assert kept[0] == prose(5) + "\nCited fact here."
    assert scored.counts["line_no_terminal_punct"] == 2 and scored.counts["line_javascript"] == 1
    assert list(step.decide(scored.scores)) == [None, "curly_bracket", "too_few_sentences"]
    off = dataclasses.replace(step, min_num_sentences=3)
    assert list(off.decide(scored.scores)) == [None, "curly_bracket", None]


def test_word_counts_without_assembly_match_the_words():
    from tokenmill.curate.filters.heuristics.text import count_words, split_words, text_column

    text = text_column(batch(TEXTS + ["don't stop-gap U.S. (e.g. this)... #tag 3.5%"]))
    words = split_words(text)
    np.testing.assert_array_equal(split_words(text, counts_only=True), words.counts)
    np.testing.assert_array_equal(count_words(text), words.counts)
    last = words.values.to_pylist()[-int(words.counts[-1]):]
    assert last == ["do", "n't", "stop", "-", "gap", "U.S.", "(", "e.g.", "this", ")", "...", "#", "tag", "3.5", "%"]
