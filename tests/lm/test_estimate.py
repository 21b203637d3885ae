"""The n-gram model itself: exact counts, a distribution in every context, KenLM's reading of the ARPA file."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from lmkit import synthetic_docs, write_jsonl

from tokenmill.lm.counts import (
    UnitCounts,
    Vocab,
    chunk_counts,
    count_rows,
    merged_order,
    merged_vocab,
    ngram_rows,
    sentence_ids,
)
from tokenmill.lm.model import NgramModel
from tokenmill.lm.normalize import sentences
from tokenmill.lm.train import LmSettings, train

try:
    import kenlm
except ImportError:  # the query module compiles C++ on install: not in the test extra
    kenlm = None

needs_kenlm = pytest.mark.skipif(kenlm is None, reason="kenlm is not installed (pip install kenlm: it compiles "
                                                       "KenLM's C++, about 2.5 minutes)")


def _train(tmp_path: Path, docs: list[str], **settings) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "lm"
    train([str(write_jsonl(tmp_path / "ref.jsonl", docs))], out=out, settings=LmSettings(**settings))
    return out


def test_normalisation_lowercases_folds_digits_and_splits_punctuation():
    assert list(sentences("Ｆｕｌｌ Width, 1999!\n\n  \nSecond LINE 42")) == [
        ["full", "width", ",", "0000", "!"], ["second", "line", "00"]]


def test_chunked_counts_are_the_counts_of_the_whole_text():
    docs = synthetic_docs(200)
    whole, chunked = UnitCounts(3, 10**9), UnitCounts(3, 1000)  # 1000 words: many chunks, merged as they go
    for d in docs:
        whole.add(list(sentences(d)))
        chunked.add(list(sentences(d)))
    whole.flush()
    chunked.flush()
    assert len(chunked.parts[2]) < 10
    for n in range(3):
        a = count_rows(np.concatenate([r for r, _ in whole.parts[n]]), np.concatenate([c for _, c in whole.parts[n]]))
        b = count_rows(np.concatenate([r for r, _ in chunked.parts[n]]),
                       np.concatenate([c for _, c in chunked.parts[n]]))
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_a_chunk_is_counted_as_its_rows_are():
    """The per-chunk count (one integer sort per order) equals sorting and summing every n-gram row."""
    vocab = Vocab()
    ids, sent = sentence_ids(vocab, [s for d in synthetic_docs(50) for s in sentences(d)])
    for n, (rows, counts) in enumerate(chunk_counts(ids, sent, 4), start=1):
        want_rows, want_counts = count_rows(ngram_rows(ids, sent, n))
        assert np.array_equal(rows, want_rows) and np.array_equal(counts, want_counts)
        assert counts.sum() == len(ngram_rows(ids, sent, n))


def test_the_merge_compacting_as_it_goes_sums_as_one_concatenation(tmp_path):
    docs = synthetic_docs(300)
    dirs = []
    for u in range(5):
        counter = UnitCounts(3, 10_000)
        for d in docs[u::5]:
            counter.add(list(sentences(d)))
        counter.write(tmp_path / f"u{u}")
        dirs.append(tmp_path / f"u{u}")
    vocab, maps = merged_vocab(dirs)
    for n in (1, 2, 3):
        every = merged_order(dirs, maps, n, spare=0)  # compacted after every unit
        once = merged_order(dirs, maps, n, spare=10**9)  # summed once at the end
        assert np.array_equal(every[0], once[0]) and np.array_equal(every[1], once[1])
        assert every[1].sum() == sum(int(np.load(d / f"{n}.counts.npy").sum()) for d in dirs)


def test_ngram_rows_never_cross_a_sentence():
    vocab = Vocab()
    ids, sent = sentence_ids(vocab, [["a", "b"], ["c"]])
    rows = {tuple(vocab_word(vocab, i) for i in r) for r in ngram_rows(ids, sent, 3)}
    assert rows == {("<s>", "a", "b"), ("a", "b", "</s>"), ("<s>", "c", "</s>")}


def vocab_word(vocab: Vocab, i: int) -> str:
    return list(vocab.ids)[i]


@pytest.mark.parametrize("prune", [(0,), (0, 0, 1), (0, 1, 1, 2)])
def test_every_context_is_a_distribution(tmp_path, prune):
    """Summed over the vocabulary (``</s>`` and ``<unk>`` in, ``<s>`` out) the model's probabilities after a
    history are 1, pruned or not: the backoffs carry exactly the mass of what was dropped."""
    docs = synthetic_docs(300)
    model = NgramModel(_train(tmp_path, docs, order=4, prune=prune) / "model.tmlm")
    words = [w for w in model.ids if w != "<s>"]
    histories = [s[:k] for d in docs[:8] for s in sentences(d) for k in (0, 1, 2, 3)] + [["zzz", "a"]]
    for history in histories:
        total = sum(10 ** _next_word(model, history, w) for w in words)
        assert total == pytest.approx(1.0, abs=1e-4), history


def _next_word(model: NgramModel, history: list[str], word: str) -> float:
    """log10 p(word | <s> history) from the model's per-position scores."""
    ids, starts = model.encode([[*history, word]])
    return float(model.word_scores(ids, starts)[len(history) + 1])


def test_pruning_keeps_the_model_closed_and_smaller(tmp_path):
    docs = synthetic_docs(300)
    full = NgramModel(_train(tmp_path / "a", docs, order=4, prune=(0,)) / "model.tmlm")
    small = NgramModel(_train(tmp_path / "b", docs, order=4, prune=(0, 1)) / "model.tmlm")
    assert [len(k) for k in small.keys][0] == len(full.keys[0])
    assert all(len(s) < len(f) for s, f in zip(small.keys[1:], full.keys[1:]))
    for n in range(2, 5):  # every kept n-gram's prefix is kept (the packed key's prefix index is valid)
        assert (small.keys[n - 1] // small.size < len(small.keys[n - 2])).all()


@needs_kenlm
def test_kenlm_reads_the_arpa_and_agrees_on_synthetic_text(tmp_path):
    docs = synthetic_docs(400)
    for prune in [(0,), (0, 0, 1)]:
        out = _train(tmp_path / "-".join(map(str, prune)), docs, order=5, prune=prune)
        held = [s for d in synthetic_docs(60, seed=1) for s in sentences(d)] + [["unseen", "a"], ["a"]]
        _agree(out, held)


@needs_kenlm
def test_kenlm_agrees_on_real_text(tmp_path, shared_data):
    text = (shared_data / "curation" / "quality" / "wikitext2_test_tokenized.txt").read_text(encoding="utf-8")
    paragraphs = [p for p in text.split("\n \n") if p.strip()]
    out = _train(tmp_path, paragraphs[::2], order=5)
    held = [s for p in paragraphs[1::2][:300] for s in sentences(p)]
    assert len(held) > 200
    _agree(out, held)


def _agree(out: Path, held: list[list[str]]) -> None:
    """tokenmill's log10 p per sentence agrees with KenLM's on the same ARPA file to 1e-4.

    ``kenlm.Model.score`` adds its float32 word scores in float32 (its error on a 150-word sentence reaches
    1e-3); the sentences are compared with KenLM's word scores added in float64, and with ``score`` itself
    on sentences of up to 25 words, where its float32 sum is within 1e-4.
    """
    ken = kenlm.Model(str(out / "model.arpa"))
    ours = NgramModel(out / "model.tmlm").score(held)
    words = [[p for p, _, _ in ken.full_scores(" ".join(s))] for s in held]
    theirs = np.array([sum(w) for w in words])
    assert np.abs(ours - theirs).max() < 1e-4
    short = np.array([len(s) <= 25 for s in held])
    scored = np.array([ken.score(" ".join(s)) for s in held])
    assert short.sum() > 20 and np.abs(ours[short] - scored[short]).max() < 1e-4
    assert ken.order == NgramModel(out / "model.tmlm").order
    assert not any(itertools.chain.from_iterable(np.isnan(w) for w in words))
