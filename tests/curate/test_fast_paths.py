"""The heuristic steps' fast paths give exactly what their reference implementations give
(``oraclekit.py``): every statistic bit for bit, the rewritten text, the modifiers' counts, on random
texts built to hit the corner cases (empty, whitespace only, unicode whitespace and line breaks, very long
lines, the rules' own trigger phrases)."""

from __future__ import annotations

import random

import numpy as np
import oraclekit as ref
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tokenmill.curate.filters.heuristics.refinedweb import RefinedWeb

PIECES = [
    "the", "of", "and", "to", "be", "that", "with", "have", "word", "Lorem", "ipsum", "dolor", "sit", "amet.",
    "don't", "it's", "cannot", "gonna", "well-known", "U.S.", "e.g.", "a.m.", "Mr.", "3.5%", "$12", "(x)",
    "[ref]", "\"quoted\"", "‘single’", "...", "…", "—", "--", "#tag", "•", "-", "12", "1,234", "99.9",
    "ITEMS IN CART", "items in cart", "Read more...", "read more...", "Sign-in", "sign-in", "12 likes",
    "3.4k views", "5 comments", "Ünïcödé", "naïve", "日本語のテキスト", "中文。", "Привет", "مرحبا", "🙂", "🙂🙂",
    "ß", "İ", "ǅ", "x" * 300, "a-b-c", "http://x.org/a-b", "www.example.com", "\ue000", "\x00", "\x7f",
]
SPACES = [" ", " ", " ", "  ", "\t", "\n", "\n", "\n\n", "\n\n\n", "\n\n\n\n", "\r\n", "\r", "\x0b", "\x0c", "\x85",
          "\u00a0", "\u2028", "\u2029", "\u3000", "\u2009", "\x1c", " \n "]


def random_text(rng: random.Random) -> str | None:
    kind = rng.random()
    if kind < 0.03:
        return None
    if kind < 0.06:
        return ""
    if kind < 0.1:
        return "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 6)))
    if kind < 0.12:
        return " ".join(rng.choice(PIECES) for _ in range(3000))  # one very long line
    out = []
    for _ in range(rng.randint(1, 80)):
        out.append(rng.choice(PIECES) if rng.random() < 0.8 else rng.choice(PIECES).upper())
        out.append(rng.choice(SPACES) if rng.random() < 0.4 else " ")
    if rng.random() < 0.3:
        out = out[:-1]
    return "".join(out)


def random_batch(seed: int, n: int = 300) -> pa.RecordBatch:
    rng = random.Random(seed)
    texts = [random_text(rng) for _ in range(n)]
    return pa.record_batch({"id": pa.array([str(i) for i in range(n)]), "text": pa.array(texts, pa.large_string())})


def same_scored(got, want) -> None:
    assert got.scores.keys() == want.scores.keys()
    for name in want.scores:
        a, b = np.asarray(got.scores[name]), np.asarray(want.scores[name])
        assert a.dtype == b.dtype, name
        assert a.tobytes() == b.tobytes(), name  # float bits included
    assert (got.text is None) == (want.text is None)
    if want.text is not None:
        assert got.text.to_pylist() == want.text.to_pylist()
    assert dict(got.counts) == dict(want.counts)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("params", [{}, {"min_line_words": 5, "max_uppercase_ratio": 0.2}, {"remove_substrings": False}])
def test_refinedweb_splits_only_the_changed_lines(seed, params):
    step = RefinedWeb(**params)
    b = random_batch(seed)
    same_scored(step.score(b), ref.refinedweb_score(step, b))


QUALITY_PIECES = [".", ",", "!", "?", ";", ":", "(", ")", "[", "]", "{", "}", '"', "“", "”", "«", "»", "'", "-",
                  "A", "b", "İ", "ẞ", "Σ", "ǅ", "x.y", "..", "...", " . ", "\\s", "\\1"]


@pytest.mark.parametrize("seed", range(8))
def test_quality_normalise_gives_the_strings_of_collapsing_every_whitespace_run(seed):
    from tokenmill.curate.quality.classifier import normalise

    rng = random.Random(seed)
    alphabet = QUALITY_PIECES + SPACES + PIECES[:20]
    texts = [random_text(rng) for _ in range(200)]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(400)]
    texts += ["", " ", "  ", "\t", " \t", "\t ", "\x0b", " \x0b ", "a \x0b\x0b b", "\u00a0 a \u00a0", " a ", "a  b",
              "a\r\n\r\nb", "x" + " " * 1000 + "y", ".( [", "\n.\n", None]
    arr = pa.array(texts, pa.large_string())
    assert normalise(arr).to_pylist() == ref.quality_normalise(arr).to_pylist()
    plain = pa.array(texts, pa.string())  # the type a documents file holds
    assert normalise(plain).to_pylist() == ref.quality_normalise(plain).to_pylist()


@pytest.fixture(scope="module")
def langid_model():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk_bytes", [1, 3000, 4 << 20])
def test_language_batches_give_the_reference_labels_and_probability_bits(seed, chunk_bytes, langid_model):
    from tokenmill.curate.filters.langid_batch import BatchIdentifier

    texts = [t or "" for t in random_batch(seed, 120).column("text").to_pylist()] + ["", "a", "ab", "abcdef", ""]
    labels, probs = BatchIdentifier(langid_model, chunk_bytes=chunk_bytes).classify(texts)
    want_labels, want_probs = ref.ReferenceIdentifier(langid_model, chunk_bytes=chunk_bytes).classify(texts)
    assert labels == want_labels and probs.tobytes() == want_probs.tobytes()


WORDS_EXTRA = ["a-b-c-d 1-2-3 x--y e.g.U.S. well—known a:b<c=d/e 3+4*5^6 a,b,c ...... …… don't DON'T cannot",
               "", " ", "word " * 50, "(((x))) «quoted» “curly” ‘single’ §5 100% =x+ –dash— ...word... Mr. U.S. e.g."]


@pytest.mark.parametrize("seed", range(6))
def test_words_shared_between_equal_chunks_equal_the_words_of_every_chunk(seed):
    from tokenmill.curate.filters.heuristics.text import split_words, text_column

    b = random_batch(seed, 200)
    texts = b.column("text").to_pylist() + WORDS_EXTRA
    text = text_column(pa.record_batch({"text": pa.array(texts, pa.large_string())}))
    got, want = split_words(text), ref.split_words(text)
    assert got.values.to_pylist() == want.values.to_pylist()
    for field in ("ids", "lengths", "symbol", "parents", "counts"):
        a, b_ = getattr(got, field), getattr(want, field)
        assert a.dtype == b_.dtype and np.array_equal(a, b_), field
    np.testing.assert_array_equal(split_words(text, counts_only=True), ref.split_words(text, counts_only=True))
    firsts = np.unique(want.ids, return_index=True)[1]
    np.testing.assert_array_equal(got.firsts, firsts)
    np.testing.assert_array_equal(got.match(r"^[\pL\pN]"), got.pieces().match(r"^[\pL\pN]"))


@pytest.mark.parametrize("max_chunks", [1 << 19, 300, 1])
def test_words_of_batch_after_batch_equal_the_words_of_every_chunk_whatever_the_lexicon_holds(max_chunks, monkeypatch):
    """The lexicon keeps the chunks of earlier batches (and empties itself when full): batches that share
    chunks, repeat earlier ones or hold none of them give the reference words, ids and first occurrences."""
    from tokenmill.curate.filters.heuristics import text as T

    monkeypatch.setattr(T, "LEXICON", T.Lexicon(max_chunks=max_chunks))
    batches = [random_batch(seed, 120).column("text").to_pylist() for seed in (20, 21, 20)]
    batches += [WORDS_EXTRA, batches[1][:7] + WORDS_EXTRA[:2], [], [" "]]
    for texts in batches:
        text = T.text_column(pa.record_batch({"text": pa.array(texts, pa.large_string())}))
        got, want = T.split_words(text), ref.split_words(text)
        assert got.values.to_pylist() == want.values.to_pylist()
        for field in ("ids", "lengths", "symbol", "parents", "counts"):
            a, b_ = getattr(got, field), getattr(want, field)
            assert a.dtype == b_.dtype and np.array_equal(a, b_), field
        np.testing.assert_array_equal(got.firsts, np.unique(want.ids, return_index=True)[1])
        assert got.distinct().to_pylist() == want.values.take(pa.array(got.firsts)).to_pylist()
        np.testing.assert_array_equal(T.split_words(text, counts_only=True), want.counts)
        held = len(pc.unique(pc.list_flatten(pc.utf8_split_whitespace(text))))
        assert len(T.LEXICON.chunks) <= max(max_chunks, held)  # bounded, but a batch keeps its own chunks


def test_words_split_from_several_threads_at_once_equal_the_reference(monkeypatch):
    """The lexicon is shared by the threads of a process: batches split concurrently (numpy and Arrow release
    the GIL), with a lexicon small enough to empty itself often, still give the reference words."""
    from concurrent.futures import ThreadPoolExecutor

    from tokenmill.curate.filters.heuristics import text as T

    monkeypatch.setattr(T, "LEXICON", T.Lexicon(max_chunks=2000))
    texts = [T.text_column(pa.record_batch({"text": pa.array(random_batch(seed, 80).column("text").to_pylist(),
                                                                pa.large_string())})) for seed in range(30, 38)]
    want = [ref.split_words(t) for t in texts]

    def check(k: int) -> bool:
        got = T.split_words(texts[k % len(texts)])
        w = want[k % len(texts)]
        return (got.values.to_pylist() == w.values.to_pylist() and np.array_equal(got.ids, w.ids)
                and np.array_equal(got.lengths, w.lengths) and np.array_equal(got.symbol, w.symbol))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(check, range(48)))


def test_words_of_no_text():
    from tokenmill.curate.filters.heuristics.text import split_words

    for texts in ([], [""], [" ", "\n"]):
        w = split_words(pa.array(texts, pa.large_string()))
        assert len(w.values) == len(w.ids) == len(w.firsts) == 0 and list(w.counts) == [0] * len(texts)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", ["gopher_quality", "gopher_repetition", "fineweb", "c4"])
def test_word_based_steps_score_as_with_the_reference_words(name, seed, monkeypatch):
    import importlib

    from tokenmill.curate.filters.heuristics import text
    from tokenmill.steps.registry import step_class

    step = step_class(name)()
    b = random_batch(100 + seed, 250)
    text._CACHE.clear()
    got = step.score(b)
    module = importlib.import_module(type(step).__module__)
    for attr in ("words", "count_words"):
        if hasattr(module, attr):
            monkeypatch.setattr(module, attr, lambda t, _a=attr: ref.split_words(t, counts_only=_a == "count_words"))
    same_scored(got, step.score(b))


def test_character_sets_equal_the_per_code_point_scan():
    from tokenmill.curate.filters.heuristics import text

    for cats in [("Sc", "So"), ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Cc"), ("Zs",)]:
        assert text._chars(*cats) == ref.chars(*cats)


@pytest.mark.parametrize("seed", range(4))
def test_top_ngram_chars_equal_sorting_every_group(seed):
    from tokenmill.curate.filters.heuristics import ngrams
    from tokenmill.curate.filters.heuristics.text import split_words, text_column

    rng = random.Random(seed)
    small = ["a", "b", "the", "cat", "sat", "on", "mat", "ü", "日本"]  # few words: many repeated n-grams
    texts = [" ".join(rng.choice(small) for _ in range(rng.randint(0, 60))) for _ in range(150)]
    texts += [t or "" for t in random_batch(seed, 100).column("text").to_pylist()]
    w = split_words(text_column(pa.record_batch({"text": pa.array(texts, pa.large_string())})))
    grams = ngrams.repeated_grams(w, [2, 3, 4, 5, 6, 10])
    for n in (2, 3, 4):
        np.testing.assert_array_equal(ngrams.top_chars(w, grams[n]), ref.top_chars(w, grams[n]))
    for n in (5, 6, 10):
        np.testing.assert_array_equal(ngrams._span_chars(w, grams[n].start, n), ref.span_chars(w, grams[n].start, n))


@pytest.mark.parametrize("seed", range(3))
def test_duplicate_ngram_scan_in_slices_equals_one_pass(seed, monkeypatch):
    """The greedy scan converts its candidate positions to Python ints a slice at a time; the counted
    characters do not depend on where the slices end (a counted n-gram may straddle two of them)."""
    from tokenmill.curate.filters.heuristics import ngrams
    from tokenmill.curate.filters.heuristics.text import split_words, text_column

    rng = random.Random(seed)
    small = ["a", "b", "the", "cat", "sat", "on", "mat"]
    texts = [" ".join(rng.choice(small) for _ in range(rng.randint(0, 400))) for _ in range(60)]
    texts += [t or "" for t in random_batch(seed, 60).column("text").to_pylist()]
    w = split_words(text_column(pa.record_batch({"text": pa.array(texts, pa.large_string())})))
    grams = ngrams.repeated_grams(w, [5, 6, 7, 10])
    whole = {n: ngrams.duplicate_chars(w, grams[n]) for n in grams}
    assert any(v.any() for v in whole.values())
    for size in (1, 7, 64):
        monkeypatch.setattr(ngrams, "SCAN_SLICE", size)
        for n in grams:
            np.testing.assert_array_equal(ngrams.duplicate_chars(w, grams[n]), whole[n])


def test_iter_grams_yields_what_repeated_grams_holds():
    from tokenmill.curate.filters.heuristics import ngrams
    from tokenmill.curate.filters.heuristics.text import split_words, text_column

    w = split_words(text_column(random_batch(5, 200)))
    held = ngrams.repeated_grams(w, [2, 4, 7])
    seen = []
    for n, g in ngrams.iter_grams(w, [2, 4, 7]):
        seen.append(n)
        for field in ("start", "row", "group", "first", "size"):
            np.testing.assert_array_equal(getattr(g, field), getattr(held[n], field))
    assert seen == [2, 4, 7]


@pytest.mark.parametrize("bits", [1, 16, 22])
def test_ngram_prefilter_drops_only_ngrams_that_occur_once(bits, monkeypatch):
    """The bucket count before each sort leaves out only keys alone in their bucket: with every key counted
    (2 buckets: every key shares one, and none leaves; more: many are alone) Gopher repetition scores what it
    scores with every key sorted."""
    from tokenmill.curate.filters.heuristics import ngrams
    from tokenmill.curate.filters.heuristics.gopher import GopherRepetition
    from tokenmill.curate.filters.heuristics.text import split_words, text_column

    rng = random.Random(bits)
    small = ["a", "b", "the", "cat", "sat", "on", "mat"]
    texts = [" ".join(rng.choice(small) for _ in range(rng.randint(0, 300))) for _ in range(80)]
    batch = pa.record_batch({"text": pa.array(texts + [t or "" for t in random_batch(bits, 120).column("text").to_pylist()],
                                              pa.large_string())})
    step = GopherRepetition(top_n_grams=((1, 0.2), (2, 0.2), (3, 0.18), (4, 0.16)))
    w = split_words(text_column(batch))
    kept = lambda: [len(g.start) for _, g in ngrams.iter_grams(w, [2, 5])]  # noqa: E731
    monkeypatch.setattr(ngrams, "MIN_PREFILTER", 1 << 62)
    want, every = step.score(batch), kept()
    monkeypatch.setattr(ngrams, "MIN_PREFILTER", 0)
    monkeypatch.setattr(ngrams, "MAX_BUCKET_BITS", bits)
    fewer = kept()
    assert fewer[0] == every[0] if bits == 1 else fewer[0] < every[0]
    same_scored(step.score(batch), want)


@pytest.mark.parametrize("at_least", [1, 2])
def test_newline_runs_split_as_the_regex_does(at_least):
    """Gopher repetition's lines and paragraphs come from a literal split at one or two newlines: the same
    pieces as ``re.split`` at runs of them, with leading, trailing and odd-length runs and other breaks."""
    import re

    from tokenmill.curate.filters.heuristics.text import split_newline_runs, strip

    rng = random.Random(at_least)
    alphabet = ["\n", "\n", "\n", "a", "bc", " ", "\r", "\r\n", "é", "\u2028", "\n\n\n"]
    texts = ["", "\n", "\n\n", "\n\n\n", "a\n\n\n\n\nb", "\n\n\na", "a\n\n\n", "a\n\n\n\n"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25))) for _ in range(3000)]
    texts += [t or "" for t in random_batch(at_least, 200).column("text").to_pylist()]
    pattern = r"\n+" if at_least == 1 else r"\n{2,}"
    for column in (pa.array(texts, pa.large_string()), strip(pa.array(texts, pa.large_string()))):
        got = split_newline_runs(column, at_least)
        want = [re.split(pattern, t) for t in column.to_pylist()]
        assert got.values.to_pylist() == [piece for pieces in want for piece in pieces]
        assert got.counts.tolist() == [len(pieces) for pieces in want]
        assert got.parents.tolist() == [row for row, pieces in enumerate(want) for _ in pieces]
