"""sft_quality: each rule on examples that must and must not trigger it."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from tokenmill.curate.quality.sft import SftQuality, dup_ngram_fraction
from tokenmill.steps.registry import step_class

GOOD = ("The capital of France is Paris. It has been the country's capital for centuries and is its largest "
        "city, home to the national government and many institutions.")


def _decide(prompts, responses, **kw):
    step = SftQuality(**kw)
    step.setup()
    batch = pa.record_batch({"prompt": pa.array(prompts, type=pa.large_string()),
                             "response": pa.array(responses, type=pa.large_string())})
    return list(step.decide(step.score(batch).scores))


@pytest.mark.parametrize("response,rule", [
    ("", "empty_answer"), ("   N/A ", "empty_answer"), ("...", "empty_answer"), ("<noinput>", "empty_answer"),
    ("[insert answer]", "empty_answer"), ("Your answer here.", "empty_answer"),
    ("As an AI language model, I do not have opinions.", "refusal"),
    ("I'm sorry, but I cannot help with that request.", "refusal"),
    ("I can't assist with that.", "refusal"),
    (GOOD + " The city is also known for its museums, its river and its", "cut_mid_sentence"),
    (" ".join(["The cat sat on the mat."] * 12), "repeated_ngrams"),
])
def test_rule_triggers(response, rule):
    assert _decide(["What is the capital of France?"], [response], check_language=False) == [rule]


@pytest.mark.parametrize("response", [
    GOOD, "Paris", "42", "Steps:\n1. Open the file\n2. Save it",
    "```python\nprint('hi')\n```", GOOD + " (see the map)", "Yes, it is \"Paris\"",
    "I'm sorry to hear that your cat is ill; here is what usually helps: rest, water and a visit to the vet.",
])
def test_good_answers_pass(response):
    assert _decide(["What is the capital of France?"], [response], check_language=False) == [None]


def test_language_mismatch():
    pytest.importorskip("py3langid")
    fr = "Quelle est la capitale de la France et pourquoi est-elle si importante pour le pays ?"
    en = "The capital of France is Paris, which is important because the government sits there."
    de = "Die Hauptstadt von Frankreich ist Paris, weil dort die Regierung ihren Sitz hat und vieles mehr."
    assert _decide([fr, en, "Hi"], [en, en, de]) == ["language_mismatch", None, None]


def test_duplicate_fraction_counts_only_long_texts():
    fr = dup_ngram_fraction(pa.array(["a b c a b c", " ".join(["x y z"] * 20), GOOD]))
    assert fr[0] == 0 and fr[1] > 0.9 and fr[2] == 0


def test_pickles_and_is_registered():
    assert pickle.loads(pickle.dumps(SftQuality())) == SftQuality()
    assert step_class("sft_quality") is SftQuality
