"""Benchmark corpora: real documents read with ``tokenmill.io``, or generated pseudo-text; resampled to a size.

Sizes are in MB of UTF-8 text (1 MB = 10**6 bytes). Everything is deterministic for a given seed.

The generated corpus imitates web text in the numbers that matter to storage and tokenization: document
lengths are log-normal (median about 2,400 characters, a long tail to 200,000), words follow a Zipf law
over a vocabulary of 30,000 syllable-built words, sentences end in punctuation, paragraphs in newlines.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from tokenmill.errors import InputError
from tokenmill.io import expand_inputs, plan_units, read_unit

MB = 1_000_000
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "si", "vo", "pe", "da", "an", "er", "in", "ost", "ul",
             "the", "and", "ing", "ion", "re", "ch", "st", "ly", "en", "or", "al", "ex", "qu", "ph", "ou")


def read_texts(inputs: Sequence[str], *, text_mode: str = "auto") -> list[str]:
    """The non-blank ``text`` of every document in ``inputs`` (files, directories, globs), in input order."""
    texts: list[str] = []
    units = plan_units(expand_inputs(list(inputs), text_mode=text_mode), unit_bytes=64 << 20)
    for unit in units:
        for raw in read_unit(unit, batch_rows=2048, text_mode=text_mode):
            texts.extend(_texts_of(raw))
    return texts


def read_labelled(inputs: Sequence[str], *, label: str, text_mode: str = "auto") -> tuple[list[str], list]:
    """The non-blank ``text`` of every document in ``inputs`` and its ``label`` field (None where it has none),
    in input order: the labelled sets the quality benchmarks score against."""
    texts: list[str] = []
    labels: list = []
    units = plan_units(expand_inputs(list(inputs), text_mode=text_mode), unit_bytes=64 << 20)
    for unit in units:
        for raw in read_unit(unit, batch_rows=2048, text_mode=text_mode):
            for text, value in zip(_column(raw, "text"), _column(raw, label)):
                if isinstance(text, str) and text.strip():
                    texts.append(text)
                    labels.append(value)
    return texts, labels


def _texts_of(raw) -> list[str]:
    return [t for t in _column(raw, "text") if isinstance(t, str) and t.strip()]


def _column(raw, name: str) -> list:
    """The ``name`` values of a batch, None for records without it."""
    if raw.table is not None:
        n = raw.table.num_rows
        return raw.table.column(name).to_pylist() if name in raw.table.schema.names else [None] * n
    return [row.get(name) if isinstance(row, dict) else None for row in raw.rows or []]


def resample(texts: Sequence[str], *, mb: float, seed: int = 0) -> list[str]:
    """Documents drawn from ``texts`` with replacement, in shuffled order, until they hold ``mb`` MB."""
    if not texts:
        raise InputError("no documents to benchmark: the inputs hold no record with a non-blank 'text' field; "
                         "give files with documents, or no inputs for the generated corpus")
    return list(iter_resampled(texts, mb=mb, seed=seed))


def iter_resampled(texts: Sequence[str], *, mb: float, seed: int = 0) -> Iterator[str]:
    """Like :func:`resample`, one document at a time (for corpora larger than memory should hold twice)."""
    sizes = np.array([len(t.encode("utf-8")) for t in texts], dtype=np.int64)
    rng = np.random.default_rng(seed)
    target, total = int(mb * MB), 0
    while total < target:
        picks = rng.integers(0, len(texts), size=4096)
        for i in picks.tolist():
            yield texts[int(i)]
            total += int(sizes[i])
            if total >= target:
                return


def generated_texts(*, mb: float, seed: int = 0) -> list[str]:
    """Deterministic pseudo-text documents holding about ``mb`` MB."""
    rng = np.random.default_rng(seed)
    vocab = np.array(_vocabulary(rng, 30_000), dtype=object)
    capital = np.array([w.capitalize() for w in vocab], dtype=object)
    cdf = np.cumsum(1.0 / np.arange(1, len(vocab) + 1) ** 1.1)
    cdf /= cdf[-1]
    texts: list[str] = []
    total, target = 0, int(mb * MB)
    while total < target:
        chars = int(np.clip(rng.lognormal(mean=np.log(2400), sigma=1.0), 80, 200_000))
        text = _document(rng, vocab, capital, cdf, n_words=max(12, chars // 7))
        texts.append(text)
        total += len(text)
    return texts


def _vocabulary(rng: np.random.Generator, n: int) -> list[str]:
    counts = rng.integers(1, 5, size=n)
    picks = rng.integers(0, len(SYLLABLES), size=int(counts.sum()))
    words, at = [], 0
    for c in counts:
        words.append("".join(SYLLABLES[p] for p in picks[at:at + c]))
        at += c
    return words


def _document(rng: np.random.Generator, vocab: np.ndarray, capital: np.ndarray, cdf: np.ndarray, *,
              n_words: int) -> str:
    """Zipf-distributed words; a sentence ends after 8% of words, a paragraph after 1.2%."""
    ids = np.minimum(np.searchsorted(cdf, rng.random(n_words)), len(vocab) - 1)
    ends = rng.random(n_words)
    seps = np.full(n_words, " ", dtype=object)
    seps[ends > 0.95] = ", "
    seps[ends < 0.08] = ". "
    seps[ends < 0.012] = ".\n\n"
    words = vocab[ids]
    starts = np.concatenate([[True], ends[:-1] < 0.08])
    words[starts] = capital[ids[starts]]
    seps[-1] = "."
    return "".join(w + s for w, s in zip(words, seps))
