"""Gopher repetition on one long repetitive document: the n-grams of one size are alive at a time, so the
scoring's peak memory does not grow with the number of n-gram sizes (Gopher's rules use nine), and stays a
small constant number of integers per word (issue 42: one 100 MB document needed 8.7 GB)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from memkit import traced_peak
from tokenmill.curate.filters.heuristics import text as words_text
from tokenmill.curate.filters.heuristics.gopher import GopherRepetition


def long_repetitive_document() -> str:
    """48,000 words: 800 paragraphs drawn from 40 (every n-gram size repeats along most of the text)."""
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(300)]
    paras = [" ".join(rng.choice(vocab, 60)) for _ in range(40)]
    return "\n\n".join(paras[int(i)] for i in rng.integers(0, 40, 800))


def peak_bytes(step: GopherRepetition, batch: pa.RecordBatch) -> int:
    """Peak of the Python and numpy memory ``step.score`` allocates."""
    return traced_peak(step.score, batch)


def test_gopher_repetition_memory_does_not_grow_with_ngram_sizes():
    batch = pa.record_batch({"text": pa.array([long_repetitive_document()], pa.large_string())})
    words = words_text.words(words_text.text_column(batch))  # the words cache: split before measuring
    n_words = len(words.ids)
    nine = peak_bytes(GopherRepetition(), batch)
    one = peak_bytes(GopherRepetition(top_n_grams=((2, 0.2),), dup_n_grams=()), batch)
    # all nine sizes' n-grams held at once peaked at 3.6x one size and 334 bytes per word
    assert nine <= 1.4 * one, (nine, one)
    assert nine <= 200 * n_words, nine / n_words
