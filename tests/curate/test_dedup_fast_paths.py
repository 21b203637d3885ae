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


def stable_ranges() -> str:
    """``nfkc._RANGES`` as derived here: the stable non-ASCII code points assigned in Python's Unicode data."""
    assigned = np.array([unicodedata.category(chr(c)) != "Cn" for c in range(0x110000)])
    table = stable_under_arrow() & assigned
    table[:0x80] = False
    edges = np.flatnonzero(np.diff(np.concatenate([[0], table.astype(np.int8), [0]]))).reshape(-1, 2)
    items = [f"{lo:X}-{hi - 1:X}" if hi - 1 > lo else f"{lo:X}" for lo, hi in edges]
    lines = [""]
    for item in items:
        lines[-1:] = [f"{lines[-1]} {item}".strip()] if len(lines[-1]) + len(item) < 108 else [lines[-1], item]
    return "\n".join(lines)


if __name__ == "__main__":  # regenerate the table: PYTHONPATH=src python tests/curate/test_dedup_fast_paths.py
    print(stable_ranges())
