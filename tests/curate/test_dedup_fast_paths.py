"""The dedup steps' fast paths give exactly what their reference implementations give (``oraclekit.py``):
the normalised texts, the content hashes, the shingles and the MinHash signatures, bit for bit.

The NFKC table is checked against Arrow's own ``utf8_normalize`` on every code point: each code point it
calls stable must be one that NFKC keeps, whose decomposition starts with a starter that never composes
with what comes before it (see :mod:`tokenmill.curate.dedup.nfkc`)."""

from __future__ import annotations

import random
import unicodedata

import numpy as np
import oraclekit as ref
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from test_fast_paths import random_batch

from tokenmill.curate.dedup import common as cm
from tokenmill.curate.dedup import nfkc as N
from tokenmill.curate.dedup import punctuation

CODE_POINTS = np.array([c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF])
# characters NFKC changes or that change with their neighbours: no-break and ideographic spaces, ligatures,
# fullwidth and halfwidth forms, ellipsis, superscripts, combining marks, Hangul jamo, compatibility ideographs
TRICKY = ("\u00a0", "\u3000", "\u2009", "\ufb01", "\ufb03", "\uff21", "\uff0c", "\uff9e", "\uff76", "\u2026", "\u00b2",
          "\u00bd", "\u2122", "\u0301", "\u0308", "\u0323", "\u0345", "\u0334", "\u0f73", "\u0344", "\u1100", "\u1161",
          "\u11a8", "\uac00", "\u0b47", "\u0b3e", "\u0dd9", "\u0dcf", "\u3099", "\u309a", "\uf900", "\u2f00",
          "\u212b", "\u1e9b", "\u0958", "\u00c5", "\u01c4", "\u0587", "\u0e33", "\u2028", "\u0085", "\x0b", "\x1c")
BMP = CODE_POINTS[:0xF800].tolist()
PLAIN = ("e", "a", "A", "k", "u", " ", "\n", "\t", "é", "ü", "Å", "ñ", "ß", "’", "—", "日", "本", "Ж", "ж", "م",
         "ก", "\u0b15", "\u0b2c", "\u0d9a", "\u304b", "\u30ab", "\u1112", "\U0001f642", "\U0001f44d\U0001f3fd",
         "x", "1", ".", "", "\ue000")


def arrow_chars(code_points) -> pa.Array:
    return pa.array([chr(c) for c in code_points], pa.large_string())


def same_strings(got: pa.Array, want: pa.Array) -> None:
    assert got.type == want.type
    assert got.to_pylist() == want.to_pylist()


def stable_under_arrow() -> np.ndarray:
    """Which code points Arrow's NFKC treats as stable, derived from ``pc.utf8_normalize`` alone."""
    chars = arrow_chars(CODE_POINTS)

    def keeps(strings, form):
        return np.asarray(pc.equal(pc.utf8_normalize(strings, form=form), strings), dtype=bool)

    def starter_probe(before, after):  # a non-starter reorders against U+0300 (230) or U+0334 (1)
        return keeps(pa.array([before + chr(c) + after for c in CODE_POINTS], pa.large_string()), "NFD")

    full = np.zeros(0x110000, dtype=bool)
    full[CODE_POINTS] = keeps(chars, "NFD") & starter_probe("\u0300", "") & starter_probe("", "\u0300") \
        & starter_probe("", "\u0334")
    starter = full
    composes_back = np.zeros(0x110000, dtype=bool)  # every code point after the first of a decomposition
    for d in pc.utf8_normalize(chars, form="NFD").to_pylist():
        composes_back[[ord(x) for x in d[1:]]] = True
    first = np.array([ord(d[0]) for d in pc.utf8_normalize(chars, form="NFKD").to_pylist()])
    stable = np.zeros(0x110000, dtype=bool)
    stable[CODE_POINTS] = keeps(chars, "NFKC") & starter[first] & ~composes_back[first]
    return stable


@pytest.fixture(scope="module")
def arrow_stable():
    return stable_under_arrow()


def test_every_stable_code_point_is_stable_under_arrow(arrow_stable):
    wrong = np.flatnonzero(N.STABLE & ~arrow_stable)
    assert not len(wrong), [hex(c) for c in wrong[:20]]
    assert N.STABLE[[ord(c) for c in "é’—日Жم가\U0001f642"]].all()  # the table is not trivially small
    assert N.STABLE.sum() > 270_000


def test_the_derivation_finds_what_unicode_data_says(arrow_stable):
    """The Arrow-only derivation agrees with Python's Unicode data where both know the answer."""
    for c in [0x301, 0x308, 0x345, 0x1161, 0x11A8, 0x0B3E, 0x0DCF, 0x3099, 0xFF9E, 0xA0, 0xFB01, 0x2026]:
        assert not arrow_stable[c], hex(c)
    for c in range(0x80, 0x3400):
        ch = chr(c)
        if unicodedata.category(ch) != "Cn" and (unicodedata.combining(ch) or unicodedata.normalize("NFKC", ch) != ch):
            assert not arrow_stable[c], hex(c)


def test_settled_prefixes_hold_only_stable_code_points():
    wide = CODE_POINTS[CODE_POINTS >= 0x80]
    utf8 = np.frombuffer("".join(map(chr, wide)).encode("utf-8"), dtype=np.uint8)
    lead = np.flatnonzero(utf8 >= 0xC0)
    settled = N.SETTLED[utf8[lead].astype(np.int64) << 8 | utf8[lead + 1]]
    assert not (settled & ~N.STABLE[wide]).any()
    assert settled.sum() > 200_000


def test_nfkc_of_every_code_point_next_to_its_neighbours():
    """Every code point after every other in code point order and in a few shuffles, in strings of 40."""
    rng = np.random.default_rng(0)
    for order in [CODE_POINTS, rng.permutation(CODE_POINTS), rng.permutation(CODE_POINTS)]:
        texts = pa.array(["".join(map(chr, order[i:i + 40])) for i in range(0, len(order), 40)], pa.large_string())
        assert N.nfkc(texts).equals(pc.utf8_normalize(texts, form="NFKC"))


def test_nfkc_of_every_tricky_pair_and_triple():
    pool = TRICKY + PLAIN
    texts = [a + b + c for a in pool for b in pool for c in ("", *TRICKY)]
    arr = pa.array(texts, pa.large_string())
    assert N.nfkc(arr).equals(pc.utf8_normalize(arr, form="NFKC"))


def random_unicode(rng: random.Random) -> str:
    pool = TRICKY + PLAIN
    kind = rng.random()
    if kind < 0.05:
        return ""
    if kind < 0.3:
        return "".join(chr(rng.choice(BMP)) for _ in range(rng.randint(1, 30)))
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, 60)))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_normalize_array_equals_the_reference(seed, kind):
    rng = random.Random(seed)
    texts = [random_unicode(rng) for _ in range(400)] + random_batch(seed, 200).column("text").to_pylist()
    texts = [None if rng.random() < 0.02 else t for t in texts]
    arr = pa.array(texts, kind)
    for normalize in [("nfkc",), ("nfkc", "lower", "whitespace"), ("nfkc", "lower", "punctuation"),
                      ("whitespace",), ("nfkc", "lower", "punctuation", "digits", "whitespace")]:
        for part in (arr, arr.slice(37, 311), arr.slice(len(arr) - 5)):
            same_strings(cm.normalize_array(part, normalize), ref.normalize_array(part, normalize))


def test_nfkc_of_texts_without_unstable_characters_is_the_input():
    for texts in [[], [""], ["", ""], ["plain", "日本語", "é"], ["é" * 5, "x"]]:
        arr = pa.array(texts, pa.large_string())
        assert N.nfkc(arr) is arr
    assert N.nfkc(pa.array(["a\u00a0b"], pa.string())).to_pylist() == ["a b"]


def test_whitespace_runs_match_every_whitespace_character_but_the_space():
    chars = arrow_chars(CODE_POINTS)
    every = np.asarray(pc.match_substring_regex(chars, r"^[\s\p{Z}]$"), dtype=bool)
    single = np.asarray(pc.match_substring_regex(chars, "^(?:" + cm.WHITESPACE_RUNS + ")$"), dtype=bool)
    assert (single == (every & (CODE_POINTS != 0x20))).all()


def test_the_punctuation_table_is_re2s_class():
    chars = arrow_chars(CODE_POINTS)
    want = np.asarray(pc.match_substring_regex(chars, r"^[\p{P}\p{S}]$"), dtype=bool)
    assert (punctuation.PUNCTUATION[CODE_POINTS] == want).all()
    assert not punctuation.PUNCTUATION[0xD800:0xE000].any()


def words(texts: pa.Array) -> list:
    return [None if w is None else [x for x in w if x] for w in pc.utf8_split_whitespace(texts).to_pylist()]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_blanked_punctuation_splits_into_the_reference_words(seed, kind):
    rng = random.Random(seed)
    every = "".join(map(chr, CODE_POINTS[punctuation.PUNCTUATION[CODE_POINTS]]))
    texts = [random_unicode(rng) for _ in range(300)] + random_batch(seed, 200).column("text").to_pylist()
    texts += [every, every[::-1], "a" + every + "b", "x.", ".", "——", "end\n", "a。\n\n"]
    texts = [None if rng.random() < 0.02 else t for t in texts]
    arr = pa.array(texts, kind)
    for part in (arr, arr.slice(37, 311), arr.slice(len(arr) - 5), arr.slice(0, 1), arr.slice(3, 0)):
        got = punctuation.blank(part)
        assert got.type == part.type and got.null_count == part.null_count
        assert words(got) == words(pc.replace_substring_regex(part, r"[\p{P}\p{S}]", " "))


def stable_ranges() -> str:
    """``nfkc._RANGES`` as derived here: the stable non-ASCII code points assigned in Python's Unicode data."""
    assigned = np.array([unicodedata.category(chr(c)) != "Cn" for c in range(0x110000)])
    table = stable_under_arrow() & assigned
    table[:0x80] = False
    return hex_ranges(table)


def punctuation_ranges() -> str:
    """``punctuation._RANGES`` as derived here: RE2's ``[\\p{P}\\p{S}]`` on every code point."""
    table = np.zeros(0x110000, dtype=bool)
    table[CODE_POINTS] = np.asarray(pc.match_substring_regex(arrow_chars(CODE_POINTS), r"^[\p{P}\p{S}]$"), dtype=bool)
    return hex_ranges(table)


def hex_ranges(table: np.ndarray) -> str:
    edges = np.flatnonzero(np.diff(np.concatenate([[0], table.astype(np.int8), [0]]))).reshape(-1, 2)
    items = [f"{lo:X}-{hi - 1:X}" if hi - 1 > lo else f"{lo:X}" for lo, hi in edges]
    lines = [""]
    for item in items:
        lines[-1:] = [f"{lines[-1]} {item}".strip()] if len(lines[-1]) + len(item) < 108 else [lines[-1], item]
    return "\n".join(lines)


if __name__ == "__main__":  # regenerate a table: PYTHONPATH=src python tests/curate/test_dedup_fast_paths.py [punctuation]
    import sys

    print(punctuation_ranges() if sys.argv[1:] == ["punctuation"] else stable_ranges())


def same_arrays(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def random_counts(rng: np.random.Generator, docs: int) -> np.ndarray:
    """Token counts with empty and short documents among long ones."""
    kind = rng.integers(0, 4, size=docs)
    return np.where(kind == 0, 0, np.where(kind == 1, rng.integers(1, 8, size=docs), rng.integers(1, 400, size=docs)))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n", [1, 2, 5, 7, 13, 70])
def test_shingle_hashes_equal_the_reference(seed, n):
    from tokenmill.curate.dedup.shingles import shingle_hashes

    rng = np.random.default_rng(seed)
    for got in shingle_hashes(np.zeros(0, np.uint64), np.zeros(0, np.int64), n):  # the reference raises here
        same_arrays(got, np.zeros(0, got.dtype))
    for docs in (1, 3, 200):
        counts = random_counts(rng, docs).astype(np.int64)
        values = rng.integers(0, 2**64, size=int(counts.sum()), dtype=np.uint64)
        for got, want in zip(shingle_hashes(values, counts, n), ref.shingle_hashes(values, counts, n)):
            same_arrays(got, want)


@pytest.mark.parametrize("seed", range(3))
def test_signatures_equal_the_reference(seed):
    from tokenmill.curate.dedup.shingles import CHUNK, permutations, signatures

    rng = np.random.default_rng(seed)
    for docs, size in [(0, 1), (1, 3), (7, 2 * CHUNK + 5), (300, 90), (2, CHUNK)]:
        per_doc = random_counts(rng, docs).astype(np.int64) * (1 + size // 200)
        shingles = rng.integers(0, 2**64, size=int(per_doc.sum()), dtype=np.uint64)
        shingles[: len(shingles) // 4] = rng.integers(0, 50, size=len(shingles) // 4)  # small values, repeats
        for p in (1, 140):
            a, b = permutations(p, seed)
            same_arrays(signatures(shingles, per_doc, a, b), ref.signatures(shingles, per_doc, a, b))


def corpus(seed: int) -> pa.Array:
    rng = random.Random(seed)
    texts = [random_unicode(rng) for _ in range(150)] + random_batch(seed, 250).column("text").to_pylist()
    texts += ["the same words again and again " * rng.randint(0, 20) for _ in range(40)]
    return pa.array([t or "" for t in texts], pa.large_string())


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind,n", [("word", 5), ("word", 1), ("char", 5), ("word", 9)])
def test_shingle_sets_and_signatures_equal_the_reference(seed, kind, n):
    from tokenmill.curate.dedup.minhash import MinHashDedup, _signatures_of
    from tokenmill.curate.dedup.shingles import permutations, shingle_sets

    texts = corpus(seed)
    step = MinHashDedup(shingle=kind, ngram=n)
    got, want = shingle_sets(texts, kind=kind, n=n, normalize=step.normalize), \
        ref.shingle_sets(texts, kind=kind, n=n, normalize=step.normalize)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same_arrays(g, w)
    assert shingle_sets(texts.slice(0, 0), kind=kind, n=n, normalize=step.normalize) == []
    values, counts = ref.tokens(texts, kind=kind, normalize=step.normalize)
    sh, per_doc = ref.shingle_hashes(values, counts, n)
    a, b = permutations(step.bands * step.rows, step.seed)
    sig, got_per_doc, got_sh = _signatures_of(step, texts)
    same_arrays(got_sh, sh)
    same_arrays(sig, ref.signatures(sh, per_doc, a, b))
    same_arrays(got_per_doc, per_doc)


@pytest.mark.parametrize("seed", range(3))
def test_content_hashes_equal_the_reference(seed):
    from tokenmill.curate.dedup.exact import ExactDedup, content_hashes

    texts = corpus(seed)
    for normalize in [ExactDedup().normalize, ("nfkc", "lower", "punctuation", "digits", "whitespace"), ()]:
        for part in (texts, texts.slice(101, 50), pa.array(["", " ", ""], pa.large_string()), texts.slice(0, 0),
                     pa.array(["é\u00a0x", "a"], pa.string())):
            for got, want in zip(content_hashes(part, normalize), ref.content_hashes(part, normalize)):
                same_arrays(got, want)
