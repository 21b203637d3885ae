"""The vectorised word split (a code-point class table built from the ``regex`` engine's own answers) gives
exactly the tokens of NLTK's ``WordPunctTokenizer`` pattern (:func:`words_of`, what data-selection uses),
document by document, on every script; CJK, emoji and the rest of the astral planes take ``regex`` itself."""

from __future__ import annotations

import hashlib
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.curate.select import dsir
from tokenmill.curate.select.features import (
    BucketCache,
    bucket_of,
    by_document,
    fingerprint,
    ngrams,
    tokenize,
    weights_of,
    words_of,
)

TRICKY = ["Café déjà vu: 120⁰C at 3.88$ — naïve Ⓐ x²+y₂ ½", "ΟΔΟΣ ΑΣ Β σΣ", "İstanbul ǅ ß ﬁ K", "Ꭰ Ᏼ ꭰ",
          "\ufeffbom\u00a0nbsp\u2009thin x\u0085y a\x1cb\x1fc", "ZWJ\u200djoin ZWNJ\u200cx", "emoji 🙂🙂ok 𝐀𝐁",
          "中文 文本。日本語", "", "   ", "a_b __init__ -- ... !!", "Hindi हिन्दी ज़ ि", "tab\tsep\nnew\rline", None]


def _split(texts: list) -> list[list[str]]:
    tokens, doc, lengths = tokenize(texts)
    out: list[list[str]] = [[] for _ in texts]
    for token, d in zip(tokens.to_pylist(), doc):
        out[d].append(token)
    assert [len(t) for t in out] == lengths.tolist()
    return out


def test_the_split_is_nltks_word_punct_split_on_every_kind_of_text():
    assert _split(TRICKY) == [words_of(t or "") for t in TRICKY]


def test_a_documents_weight_does_not_depend_on_its_batch():
    ratio = np.random.default_rng(0).normal(size=10_000)
    alone = [weights_of(*by_document(ngrams([t])), ratio)[0] for t in TRICKY]
    together = weights_of(*by_document(ngrams(TRICKY)), ratio)
    assert together.tolist() == alone


def test_weights_read_from_the_bucket_file_in_runs_are_the_weights_of_the_whole(tmp_path, monkeypatch):
    texts = TRICKY * 3 + ["word " * 50, "another text here"]
    ratio = np.random.default_rng(1).normal(size=10_000)
    whole = weights_of(*by_document(ngrams(texts)), ratio)
    for chars in (1, 40, 1 << 21):  # batches of one document, of a few, of all: the same features
        monkeypatch.setattr(dsir, "BATCH_CHARS", chars)
        with open(tmp_path / "u.buckets", "wb") as fh:
            features = dsir.featurise(iter([texts[:5], texts[5:]]), 10_000, fh)
        assert features["counts"].tolist() == np.bincount(ngrams(texts).bucket, minlength=10_000).tolist()
        for run in (1, 7, 1 << 20):  # a run of one n-gram still takes a whole document
            monkeypatch.setattr(dsir, "SCORE_NGRAMS", run)
            got = dsir.unit_weights(tmp_path / "u.buckets", features["per_doc"], ratio)
            assert got.tolist() == whole.tolist()


def test_a_batch_holds_at_most_its_characters_unless_one_document_is_longer(monkeypatch):
    monkeypatch.setattr(dsir, "BATCH_CHARS", 10)
    texts = ["abcd", "efgh", "ijkl", "x" * 25, None, "mn"]
    assert list(dsir._batches(texts)) == [["abcd", "efgh"], ["ijkl"], ["x" * 25], [None, "mn"]]


def _part(tmp_path, texts: list[str]):
    path = tmp_path / "part.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts, "source": ["s"] * len(texts)}),
                   path, compression="zstd")
    return path


def test_a_unit_is_read_about_its_batch_characters_at_a_time(tmp_path, monkeypatch):
    texts = [f"document {i} " * 5 for i in range(200)]  # 70 to 80 characters each
    monkeypatch.setattr(dsir, "BATCH_CHARS", 800)
    batches = list(dsir.unit_texts(_part(tmp_path, texts)))
    assert [t for b in batches for t in b] == texts
    assert len(batches) > 10 and max(sum(map(len, b)) for b in batches) <= 2 * 800


def test_the_draw_reads_the_drawn_documents_as_they_are_and_blanks_the_rest(tmp_path, monkeypatch):
    texts = [f"text {i} " * (i % 7 + 1) for i in range(300)]
    path = _part(tmp_path, texts)
    drawn = np.random.default_rng(0).random(300) < 0.1
    monkeypatch.setattr(dsir, "BATCH_CHARS", 500)  # many reads
    got = dsir.drawn_only(path, drawn)
    whole = pq.read_table(path)
    assert got.schema == whole.schema
    assert got.filter(pa.array(drawn)).equals(whole.filter(pa.array(drawn)))
    assert set(got.filter(pa.array(~drawn)).column("text").to_pylist()) == {""}
    assert got.column("id").equals(whole.column("id"))


def _package_bucket(s: str, buckets: int) -> int:
    return int(hashlib.sha256(s.encode("utf-8")).hexdigest(), 16) % buckets


def _pairs(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of the first few words, each once: the bigrams a batch asks the cache for."""
    n = min(len(words), 6)
    left, right = np.divmod(np.arange(n * n), n)
    return left, right


def _lookup_is_the_packages(cache: BucketCache, words: list[str], buckets: int) -> None:
    left, right = _pairs(words)
    uni, bi = cache.lookup(pa.array(words), left, right, buckets)
    assert uni.tolist() == [_package_bucket(w, buckets) for w in words] == bucket_of(words, buckets).tolist()
    assert bi.tolist() == [_package_bucket(f"{words[a]} {words[b]}", buckets) for a, b in zip(left, right)]


def test_the_cache_gives_the_packages_buckets_and_stays_within_its_size():
    grams = list(dict.fromkeys([w for t in TRICKY for w in words_of(t or "")] + ["a b", "ok 𝐀𝐁", "x"]))
    cache = BucketCache(size=8)
    for buckets in (10_000, 7, 10_000):  # a new bucket count forgets the old buckets
        for batch in (grams[:5], grams, grams[3:20], grams[:6], grams[:6]):  # hits, misses, overflows of the cap
            _lookup_is_the_packages(cache, batch, buckets)
            assert len(cache.words) <= 8 and len(cache.pair_key) <= 8
    cache = BucketCache(size=1000)
    _lookup_is_the_packages(cache, grams, 10_000)
    _lookup_is_the_packages(cache, grams[::-1], 10_000)
    assert len(cache.words) == len(grams)  # each word held once, hashed once
    assert len(cache.pair_key) == 72  # the first six words' pairs, then the last six's


def _thue_morse(n: int) -> tuple[str, str]:
    t = "a"
    while len(t) < n:
        t += t.translate(str.maketrans("ab", "ba"))
    return t, t.translate(str.maketrans("ab", "ba"))


def test_two_words_of_one_fingerprint_still_get_their_own_buckets():
    one, other = _thue_morse(1024)  # a Thue-Morse word and its complement: one polynomial hash modulo 2**64
    assert one != other and fingerprint(pa.array([one]))[0] == fingerprint(pa.array([other]))[0]
    cache = BucketCache(size=100)
    for batch in ([one, "x"], [other, "x", "y"], [one, other], ["y", one]):  # held, then asked for by the other
        _lookup_is_the_packages(cache, batch, 10_000)


@pytest.mark.realdata
def test_the_split_on_388_languages_of_the_udhr(shared_data):
    with zipfile.ZipFile(shared_data / "curation" / "langid" / "nltk_udhr2.zip") as z:
        texts = [z.read(n).decode("utf-8", "replace") for n in z.namelist() if n.endswith(".txt")]
    assert len(texts) > 300
    assert _split(texts) == [words_of(t) for t in texts]
