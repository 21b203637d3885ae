"""The cases behind ``heuristics.jsonl``: small texts, each built to trigger (or just miss) one rule.

``python -m tokenmill.curate.conformance.build`` scores every case with tokenmill's steps, checks that each
gets the decision it was built for, and writes the statistics, decision and (for modifiers) the new text
into ``heuristics.jsonl``. A case is ``(step, rule_under_test, params, text, expected_decision, note)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Case = tuple[str, str, dict[str, Any], Any, Any, str]

_SYL = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "de", "va", "ju", "ho", "be", "fi", "gu", "ze"]


def word(i: int, syllables: int = 2) -> str:
    """A made-up word, distinct for every ``i`` (letters only)."""
    out = []
    for _ in range(syllables):
        out.append(_SYL[i % len(_SYL)])
        i //= len(_SYL)
    return "".join(out) + _SYL[i % len(_SYL)] if i else "".join(out)


def sentence(i: int) -> str:
    """Eight words, five of them distinct made-up words: ``The kalo mine and ... with ... .``"""
    w = [word(7 * i + k + 40) for k in range(5)]
    return f"The {w[0]} {w[1]} and {w[2]} {w[3]} with {w[4]}."


def prose(sentences: int, start: int = 0, per_line: int = 1) -> str:
    """Non-repeating English-like text: ``sentences`` sentences, ``per_line`` to a line."""
    lines = []
    for i in range(start, start + sentences, per_line):
        lines.append(" ".join(sentence(j) for j in range(i, min(i + per_line, start + sentences))))
    return "\n".join(lines)


def length_cases() -> Iterator[Case]:
    p = {"min_chars": 5, "max_chars": 10}
    for text, want, note in [("", "too_short", "empty text"), (None, "too_short", "null text scores as empty"),
                             ("abcd", "too_short", "one below min"), ("abcde", None, "exactly min"),
                             ("a\nb\nc", None, "newlines count as characters: 5"), ("    ", "too_short", "4 spaces"),
                             ("中文", "too_short", "2 code points"), ("é" * 4, "too_short", "4 code points, 8 bytes"),
                             ("\U0001f642" * 4, "too_short", "4 astral code points"),
                             ("abcdefgh", None, "between"), ("x", "too_short", "one character")]:
        yield "length", "too_short", p, text, want, note
    for text, want, note in [("abcdefghij", None, "exactly max"), ("abcdefghijk", "too_long", "one above max"),
                             ("中文文本测试", None, "CJK counts code points (6)"), ("é" * 10, None, "10 code points"),
                             ("\U0001f642" * 11, "too_long", "astral code points count once each"),
                             ("é" * 11, "too_long", "11 code points"), ("a\n" * 6, "too_long", "12 with newlines"),
                             (" " * 11, "too_long", "11 spaces"), ("abcdef", None, "between")]:
        yield "length", "too_long", p, text, want, note
    yield "length", "too_long", {"max_chars": None}, "x" * 100, None, "no maximum"
    yield "length", "too_short", {}, "", None, "defaults keep everything"
    yield "length", "too_long", {}, "x" * 3, None, "defaults keep everything"


LOOSE = {"min_doc_words": None, "min_avg_word_length": None, "min_alpha_words_ratio": None, "min_stop_words": None}


def gopher_quality_cases() -> Iterator[Case]:
    g = "gopher_quality"
    good = prose(8)  # 64 words, 48 non-symbol content words + stop words
    yield g, "short_doc", {}, "", "short_doc", "empty text"
    yield g, "short_doc", {}, None, "short_doc", "null text"
    yield g, "short_doc", {}, "   \n\t ", "short_doc", "whitespace only"
    yield g, "short_doc", {}, prose(6), "short_doc", "48 words (6 sentences of 8)"
    yield g, "short_doc", {}, prose(6) + " the end", None, "exactly 50 non-symbol words"
    yield g, "short_doc", {}, prose(6) + " the", "short_doc", "49 non-symbol words"
    yield g, "short_doc", {}, prose(6) + " - - - - ,,,", "short_doc", "symbol words do not count"
    yield g, "short_doc", {}, "这是一个没有空格的中文句子" * 20, "short_doc", "CJK without spaces is one word"
    yield g, "short_doc", {}, good, None, "64 words"
    yield g, "short_doc", {"min_doc_words": None}, prose(2), None, "rule disabled"
    yield g, "long_doc", {"max_doc_words": 60}, good, "long_doc", "64 > 60"
    yield g, "long_doc", {"max_doc_words": 64}, good, None, "exactly max"
    for m in (50, 63, 100):
        yield g, "long_doc", {"max_doc_words": m}, good, "long_doc" if m < 64 else None, f"max {m}"
    yield g, "long_doc", {"max_doc_words": None}, good, None, "rule disabled"
    yield g, "long_doc", {**LOOSE, "max_doc_words": 10}, "one two three", None, "3 words (other rules off)"
    yield g, "long_doc", {**LOOSE, "max_doc_words": 2}, "one two three", "long_doc", "3 > 2"
    yield g, "long_doc", {**LOOSE, "max_doc_words": 2}, "one, two.", None, "punctuation is not a word"
    yield g, "long_doc", {**LOOSE, "max_doc_words": 2}, "don't", None, "do + n't: 2 words"
    short_words = " ".join(["at be to of an"] * 12) + " the and"
    yield g, "below_avg_word_length", {}, short_words, "below_avg_word_length", "mean 2.0"
    yield g, "below_avg_word_length", {"min_stop_words": None}, " ".join(["cat dog"] * 30), None, "mean exactly 3.0 is kept"
    yield g, "below_avg_word_length", {}, " ".join(["ca dog"] * 30), "below_avg_word_length", "mean 2.5"
    yield g, "below_avg_word_length", {"min_avg_word_length": 2}, short_words, None, "mean 2.0 >= 2"
    yield g, "below_avg_word_length", {"min_avg_word_length": None}, short_words, None, "disabled"
    yield (g, "below_avg_word_length", {}, " ".join(["a , b . c ;"] * 20), "below_avg_word_length",
           "symbols are left out of the mean (1.0)")
    yield g, "below_avg_word_length", {}, good, None, "prose"
    yield g, "below_avg_word_length", {}, " ".join(["I'm"] * 60), "below_avg_word_length", "I + 'm: mean 1.5"
    yield g, "below_avg_word_length", {"min_stop_words": None}, " ".join(["U.S. cat"] * 30), None, "U.S. is one word of 4"
    yield (g, "below_avg_word_length", {}, " ".join(["ab-cd"] * 60), "below_avg_word_length",
           "hyphen splits ab - cd: mean 2")
    long_words = " ".join(f"{word(i, 6)}" for i in range(60))
    yield g, "above_avg_word_length", {}, long_words, "above_avg_word_length", "12-letter words"
    yield (g, "above_avg_word_length", {"min_stop_words": None}, " ".join(f"{word(i, 5)}" for i in range(60)), None,
           "10-letter words")
    yield g, "above_avg_word_length", {"max_avg_word_length": 12, "min_stop_words": None}, long_words, None, "mean 12 <= 12"
    yield g, "above_avg_word_length", {"max_avg_word_length": None, "min_stop_words": None}, long_words, None, "disabled"
    yield (g, "above_avg_word_length", {}, "http://example.com/a/very/long/path/name " * 55, "above_avg_word_length",
           "a URL is one word")
    for k in range(5):
        text = " ".join(f"{word(i, 5)}{'x' * k}" for i in range(60))
        yield g, "above_avg_word_length", {"min_stop_words": None}, text, "above_avg_word_length" if k else None, f"mean {10 + k}"
    hashes = good + " #a" * 10
    yield g, "too_many_hashes", {}, hashes, "too_many_hashes", "10 '#' / 92 words ('#a' is 2 words)"
    yield g, "too_many_hashes", {}, good + " #a" * 9, None, "9 / 90 = 0.1 exactly is kept"
    yield g, "too_many_hashes", {}, good + " ##" * 5, "too_many_hashes", "'##' counts twice"
    yield g, "too_many_hashes", {"max_symbol_word_ratio": None}, hashes, None, "disabled"
    yield g, "too_many_hashes", {"max_symbol_word_ratio": 0.2}, hashes, None, "0.09 <= 0.2"
    yield g, "too_many_hashes", {}, good + " #tag" * 10, "too_many_hashes", "hashtags"
    yield g, "too_many_hashes", {}, good + " C#" * 3, None, "C# words"
    yield g, "too_many_hashes", {}, "#" * 200 + " " + good, "too_many_hashes", "a run of 200"
    yield g, "too_many_hashes", {}, good.replace("The", "#The", 8), None, "8 hashes / 80 words = 0.1 is kept"
    yield g, "too_many_hashes", {}, good.replace("The", "#The", 6), None, "6 / 70 = 0.0857"
    ell = good + " so..." * 10
    yield g, "too_many_ellipsis", {}, ell, "too_many_ellipsis", "'...' is one word: 10 / 92"
    yield g, "too_many_ellipsis", {}, good + " so…" * 10, "too_many_ellipsis", "U+2026 counts"
    yield g, "too_many_ellipsis", {}, good + " so…" * 9, None, "9 / 90 = 0.1 exactly is kept"
    yield g, "too_many_ellipsis", {}, good + " ......" * 4, "too_many_ellipsis", "'......' is one word but two ellipses: 8 / 68"
    yield g, "too_many_ellipsis", {"max_symbol_word_ratio": None}, ell, None, "disabled"
    yield g, "too_many_ellipsis", {}, good + " wait.." * 10, None, "'..' is not an ellipsis"
    yield (g, "too_many_ellipsis", {}, good + " . . ." * 10, "below_alpha_words",
           "'. . .' is no ellipsis: 3 symbol words, lowering the alpha share")
    yield g, "too_many_ellipsis", {}, good.replace(".", "...", 8), "too_many_ellipsis", "8 / 64"
    yield (g, "too_many_ellipsis", {}, good.replace(".", "...", 6), "too_many_end_ellipsis",
           "6 / 64 per word is kept, 6 of 8 lines is not")
    yield g, "too_many_ellipsis", {"max_symbol_word_ratio": 0.5}, ell, None, "loose threshold"
    bullets = "\n".join(f"- {s}" for s in prose(10).split("\n"))
    yield g, "too_many_bullets", {}, bullets, "too_many_bullets", "every line starts with '-'"
    yield g, "too_many_bullets", {}, bullets.replace("- ", "• ", 3), "too_many_bullets", "'•' counts"
    yield g, "too_many_bullets", {}, bullets.replace("- ", "* "), None, "'*' is not a Gopher bullet"
    yield (g, "too_many_bullets", {}, "\n".join(f"  - {s}" for s in prose(10).split("\n")), "too_many_bullets",
           "leading spaces are skipped")
    yield g, "too_many_bullets", {}, bullets.replace("- ", "", 1), None, "9 of 10 lines: 0.9 is kept"
    yield g, "too_many_bullets", {}, bullets + "\n", "too_many_bullets", "a final newline adds no line"
    yield g, "too_many_bullets", {}, bullets.replace("\n", "\r\n"), "too_many_bullets", "CRLF lines"
    yield g, "too_many_bullets", {"max_bullet_lines_ratio": None}, bullets, None, "disabled"
    yield g, "too_many_bullets", {}, good, None, "no bullets"
    yield g, "too_many_bullets", {}, bullets.replace("\n", "\u2028"), "too_many_bullets", "U+2028 ends a line"
    end_ell = "\n".join(s[:-1] + "..." if i < 4 else s for i, s in enumerate(prose(10).split("\n")))
    yield g, "too_many_end_ellipsis", {}, end_ell, "too_many_end_ellipsis", "4 of 10 lines"
    yield g, "too_many_end_ellipsis", {}, end_ell.replace("...", ".", 1), None, "3 of 10 = 0.3 is kept"
    yield g, "too_many_end_ellipsis", {}, end_ell.replace("...", "…"), "too_many_end_ellipsis", "U+2026"
    yield (g, "too_many_end_ellipsis", {}, end_ell.replace("...", "...   "), "too_many_end_ellipsis",
           "trailing spaces are skipped")
    yield g, "too_many_end_ellipsis", {"max_ellipsis_lines_ratio": 0.5}, end_ell, None, "0.4 <= 0.5"
    yield g, "too_many_end_ellipsis", {"max_ellipsis_lines_ratio": None}, end_ell, None, "disabled"
    yield (g, "too_many_end_ellipsis", {}, prose(8, per_line=8)[:-1] + "...", "too_many_end_ellipsis",
           "text without newlines is one line; it ends in '...'")
    yield g, "too_many_end_ellipsis", {}, end_ell.replace("...", ".."), None, "'..' is not an ellipsis"
    yield g, "too_many_end_ellipsis", {}, good, None, "none"
    yield g, "too_many_end_ellipsis", {}, end_ell + "\n\n\n", "too_many_end_ellipsis", "blank lines count: 4/12?"
    nums = good + " " + " ".join(str(i) for i in range(100, 120))
    yield g, "below_alpha_words", {}, nums, "below_alpha_words", "20 numbers in 84 words"
    yield g, "below_alpha_words", {}, good + " " + " ".join(str(i) for i in range(100, 104)), None, "56 alpha of 68"
    yield g, "below_alpha_words", {}, good + " ." * 20, "below_alpha_words", "punctuation words count against"
    yield g, "below_alpha_words", {"min_alpha_words_ratio": None}, nums, None, "disabled"
    yield g, "below_alpha_words", {"min_alpha_words_ratio": 0.5}, nums, None, "0.76 >= 0.5"
    yield g, "below_alpha_words", {}, good + " 3rd" * 20, None, "a digit word with a letter counts as alpha"
    yield g, "below_alpha_words", {}, good + " ΑΒΓ" * 20, None, "Greek letters are letters"
    yield g, "below_alpha_words", {}, good + " 中文" * 20, None, "CJK characters are letters"
    yield g, "below_alpha_words", {}, good + " 🙂" * 20, "below_alpha_words", "emoji are symbols"
    yield g, "below_alpha_words", {}, good, None, "prose"
    no_stop = " ".join(word(i) for i in range(60))
    yield g, "few_stop_words", {}, no_stop, "few_stop_words", "no stop word"
    yield g, "few_stop_words", {}, no_stop + " the", "few_stop_words", "one stop word"
    yield g, "few_stop_words", {}, no_stop + " the the the", "few_stop_words", "distinct stop words are counted"
    yield g, "few_stop_words", {}, no_stop + " the of", None, "two distinct"
    yield g, "few_stop_words", {}, no_stop + " The Of", "few_stop_words", "case-sensitive, as datatrove"
    yield g, "few_stop_words", {}, no_stop + " the, of.", None, "punctuation is split off"
    yield g, "few_stop_words", {"min_stop_words": 3}, no_stop + " the of", "few_stop_words", "3 needed"
    yield g, "few_stop_words", {"min_stop_words": None}, no_stop, None, "disabled"
    yield g, "few_stop_words", {"stop_words": ["kalo", "mine"]}, no_stop, None, "custom stop words"
    yield g, "few_stop_words", {}, no_stop + " there often", "few_stop_words", "substrings do not count"


def gopher_repetition_cases() -> Iterator[Case]:
    g = "gopher_repetition"
    good = prose(12)
    yield g, "empty", {}, "", "empty", "empty text"
    yield g, "empty", {}, None, "empty", "null text"
    yield g, "empty", {}, good, None, "prose"
    for text, want, note in [(" ", None, "one space: one blank paragraph"), ("a", None,
                              "one word: no n-grams"), ("\n", "dup_line_frac", "'' and '' lines: 1 of 2 repeats"),
                             ("\n\n", "dup_line_frac", "lines '' and '': one repeats (0.5)"),
                             ("x y", "top_2_gram", "1 bigram is 100%"),
                             ("中文", None, "CJK word"), ("ok", None, "short")]:
        yield g, "empty", {}, text, want, note
    paras = [prose(3, start=10 * i) for i in range(6)]
    rep = "\n\n".join(paras + paras[:3])
    yield g, "dup_para_frac", {}, rep, "dup_para_frac", "3 of 9 paragraphs repeat (0.33)"
    yield g, "dup_para_frac", {}, "\n\n".join(paras * 1 + paras[:1]), None, "1 of 7 paragraphs, 14% of characters"
    yield g, "dup_para_frac", {"dup_para_frac": 0.5}, rep, "dup_para_char_frac", "0.33 <= 0.5; chars 0.33 > 0.2"
    yield g, "dup_para_frac", {"dup_para_frac": None, "dup_para_char_frac": None}, rep, "dup_line_frac", "disabled"
    yield g, "dup_para_frac", {}, "\n\n\n".join(paras + paras[:3]), "dup_para_frac", "3+ newlines split too"
    yield g, "dup_para_frac", {}, "\n\n".join(paras), None, "no repeat"
    yield g, "dup_para_frac", {}, "\n\n" + "\n\n".join(paras) + "\n\n", None, "text is stripped first"
    yield (g, "dup_para_frac", {}, "\n\n".join(p.upper() if i % 2 else p for i, p in enumerate(paras + paras[:3])),
           "dup_para_frac", "case matters: 2 of 9 (0.22)?")
    yield g, "dup_para_frac", {}, "\n \n".join(paras + paras[:3]), "dup_line_frac", "'\\n \\n' is no paragraph break"
    yield g, "dup_para_frac", {}, "\n\n".join(paras[:2] * 2), "dup_para_frac", "2 of 4 = 0.5"
    big = prose(30, start=300)
    small = [prose(1, start=500 + i) for i in range(10)]
    yield g, "dup_para_char_frac", {}, "\n\n".join([big, big] + small), "dup_para_char_frac", "1 of 12 repeats, 40% chars"
    yield (g, "dup_para_char_frac", {"dup_para_char_frac": 0.5}, "\n\n".join([big, big] + small), "dup_line_frac",
           "0.4 <= 0.5")
    yield (g, "dup_para_char_frac", {"dup_para_char_frac": None, "dup_line_char_frac": None},
           "\n\n".join([big, big] + small), "dup_line_frac", "disabled")
    for k in range(1, 8):
        text = "\n\n".join([big] + small + small[:k])
        yield g, "dup_para_char_frac", {}, text, None if k < 5 else "dup_para_frac", f"{k} small repeats of 11"
    lines = prose(10).split("\n")
    yield g, "dup_line_frac", {}, "\n".join(lines + lines[:5]), "dup_line_frac", "5 of 15 lines = 0.33"
    yield g, "dup_line_frac", {}, "\n".join(lines + lines[:4]), "dup_line_char_frac", "4 of 14 = 0.29"
    yield (g, "dup_line_frac", {"dup_line_frac": 0.4, "dup_line_char_frac": 0.5}, "\n".join(lines + lines[:5]),
           "duplicated_5_n_grams", "thresholds raised")
    yield g, "dup_line_frac", {}, "\n\n\n".join(lines + lines[:5]), "dup_para_frac", "blank lines make paragraphs"
    yield g, "dup_line_frac", {}, "\n".join(lines), None, "no repeat"
    yield (g, "dup_line_frac", {}, "\n" + "\n".join(lines) + "\n", None,
           "leading+trailing newline: empty first and last lines, 1 of 12 repeats")
    yield g, "dup_line_frac", {}, "\n".join(lines[:2] * 3), "dup_line_frac", "4 of 6"
    yield (g, "dup_line_frac", {}, "\r\n".join(lines + lines[:5]), "dup_line_char_frac",
           "CRLF: '\\r' stays in the line")
    yield g, "dup_line_frac", {"dup_line_frac": None}, "\n".join(lines + lines[:5]), "dup_line_char_frac", "disabled"
    yield g, "dup_line_frac", {}, "\n".join(lines + [lines[0].lower()] * 1), None, "case matters"
    long_line = prose(20, start=800, per_line=20)
    yield g, "dup_line_char_frac", {}, "\n".join([long_line, long_line] + lines), "dup_line_char_frac", "2 of 12"
    yield (g, "dup_line_char_frac", {"dup_line_char_frac": 0.5}, "\n".join([long_line, long_line] + lines),
           "duplicated_5_n_grams", "0.36 <= 0.5")
    for k in range(1, 9):
        text = "\n".join([long_line] + lines + lines[:k])
        want = None
        yield g, "dup_line_char_frac", {"dup_line_frac": None, "dup_n_grams": []}, text, want, f"{k} short lines repeat"
    yield g, "top_2_gram", {}, good + " " + "big dog " * 20, "top_2_gram", "'big dog' x20"
    yield g, "top_2_gram", {}, good + " " + "big dog " * 8, "top_4_gram", "x8: 'big dog big dog' x7 is 20%"
    for k in (2, 4, 6):
        yield g, "top_2_gram", {}, prose(30) + " " + "big dog " * k, None, f"x{k} in long prose"
    yield (g, "top_2_gram", {"top_n_grams": [[2, 0.5]]}, good + " " + "big dog " * 12, "duplicated_10_n_grams",
           "loose threshold")
    yield g, "top_2_gram", {}, "a b", "top_2_gram", "a single bigram is 3/3"
    yield g, "top_2_gram", {}, "a", None, "no bigram"
    yield g, "top_2_gram", {"top_n_grams": []}, "a b", None, "no top rule"
    yield g, "top_2_gram", {}, prose(40) + " big, dog, " * 3, None, "'big ,' and ', dog' bigrams"
    for n in (3, 4):
        pat = " ".join(word(900 + k) for k in range(n))
        yield (g, f"top_{n}_gram", {"top_n_grams": [[n, 0.18 if n == 3 else 0.16]]}, prose(12) + (" " + pat) * 10,
               f"top_{n}_gram", f"{n}-word phrase x10")
        for k in (1, 2, 3, 4, 5, 6, 7, 8, 9):
            text = prose(40) + (" " + pat) * k
            yield (g, f"top_{n}_gram", {"top_n_grams": [[n, 0.18 if n == 3 else 0.16]], "dup_n_grams": []}, text,
                   None, f"x{k}")
    chunk = prose(3, start=700)
    for n, frac in ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)):
        only = {"top_n_grams": [], "dup_n_grams": [[n, frac]]}
        yield (g, f"duplicated_{n}_n_grams", only, prose(10) + " " + chunk + " " + chunk, f"duplicated_{n}_n_grams",
               "a repeated passage")
        yield g, f"duplicated_{n}_n_grams", only, prose(10), None, "no repeat"
        for k in range(1, 9):
            text = prose(20 + 10 * k) + " " + chunk + " " + chunk
            yield g, f"duplicated_{n}_n_grams", only, text, None, f"a repeated passage in {20 + 10 * k} sentences"


def c4_cases() -> Iterator[Case]:
    c = "c4"
    good = prose(6)
    yield c, "too_few_sentences", {}, "", "too_few_sentences", "empty"
    yield c, "too_few_sentences", {}, None, "too_few_sentences", "null"
    yield c, "too_few_sentences", {}, good, None, "6 sentences on 6 lines"
    yield c, "too_few_sentences", {}, prose(5), None, "exactly 5"
    yield c, "too_few_sentences", {}, prose(4), "too_few_sentences", "4"
    yield c, "too_few_sentences", {}, prose(5, per_line=5), None, "5 sentences on one line"
    yield (c, "too_few_sentences", {}, prose(4) + "\nno punctuation here at all", "too_few_sentences",
           "a dropped line gives no sentence")
    yield (c, "too_few_sentences", {}, prose(4) + "\nDr. Smith and Mr. Jones met in the U.S. yesterday.",
           None, "abbreviations end no sentence: 4 + 1")
    yield c, "too_few_sentences", {}, prose(4) + "\nWe waited... and waited.", None, "'...' ends none: 4 + 1"
    yield c, "too_few_sentences", {}, prose(4) + "\nIt was 3.5 meters long. Then it grew!", None, "two on one line"
    yield c, "too_few_sentences", {"min_num_sentences": 3}, prose(4), None, "3 needed"
    yield c, "too_few_sentences", {"min_num_sentences": None}, "", None, "disabled"
    yield c, "too_few_sentences", {}, "Short. Line.\n" + prose(4), "too_few_sentences", "'Short. Line.' has 2 words"
    yield c, "lorem_ipsum", {}, good + "\nLorem ipsum dolor sit amet.", "lorem_ipsum", "kept-candidate line"
    yield c, "lorem_ipsum", {}, good + "\nLOREM IPSUM dolor sit amet.", "lorem_ipsum", "any case"
    yield c, "lorem_ipsum", {}, good + "\nlorem ipsum dolor sit amet", None, "line without terminal punctuation"
    yield c, "lorem_ipsum", {}, good + "\nlorem ipsum.", None, "line of 2 words is dropped first"
    yield c, "lorem_ipsum", {"filter_lorem_ipsum": False}, good + "\nLorem ipsum dolor sit amet.", None, "disabled"
    yield c, "lorem_ipsum", {}, good + "\nThe lorem ipsum text is here.", "lorem_ipsum", "anywhere in the line"
    yield c, "lorem_ipsum", {}, good + "\nloremipsum is one word.", None, "no space"
    yield c, "lorem_ipsum", {}, good + "\nLorem ipsum and javascript here.", "lorem_ipsum", "checked before javascript"
    yield c, "lorem_ipsum", {}, good, None, "none"
    yield (c, "lorem_ipsum", {"filter_no_terminal_punct": False}, good + "\nlorem ipsum dolor sit amet", "lorem_ipsum",
           "punctuation rule off")
    yield c, "curly_bracket", {}, good + "\nfunction f() { return 1; }.", "curly_bracket", "a kept-candidate line"
    yield c, "curly_bracket", {}, good + "\nvar x = {a: 1}", None, "no terminal punctuation: dropped first"
    yield c, "curly_bracket", {}, good + "\nUse javascript {x} here.", None, "javascript line dropped first"
    yield c, "curly_bracket", {"filter_curly_bracket": False}, good + "\nThe set {a, b} is here.", None, "disabled"
    yield c, "curly_bracket", {}, good + "\nThe set {a, b} is here.", "curly_bracket", "set notation"
    yield c, "curly_bracket", {}, good + "\nThe close } alone is fine.", None, "only '{' counts"
    yield c, "curly_bracket", {}, "{ \n" + good, None, "a one-word line"
    yield c, "curly_bracket", {}, good + "\n{{template}} is a thing here.", "curly_bracket", "double"
    yield (c, "curly_bracket", {}, good + "\nSee the privacy policy {here}.", "curly_bracket",
           "'{' is checked before the policy phrases")
    yield c, "curly_bracket", {}, good, None, "none"
    yield (c, "too_few_sentences", {}, prose(4) + "\nThe word " + "x" * 1001 + " is long.", "too_few_sentences",
           "line with a word over 1000 characters is dropped")
    yield (c, "too_few_sentences", {}, prose(4) + "\nEnable JavaScript to see this page.", "too_few_sentences",
           "javascript line dropped")
    yield (c, "too_few_sentences", {}, prose(4) + "\nRead our terms of use for more.", "too_few_sentences",
           "policy line dropped")
    yield c, "too_few_sentences", {}, prose(4) + "\nThis site uses cookies to work.", "too_few_sentences", "cookies"
    yield c, "too_few_sentences", {}, prose(4) + "\nThis has a citation.[1]", None, "citation removed after the "
    "punctuation check? no: before it; line ends with '.' after removal"
    yield c, "too_few_sentences", {}, prose(4) + "\nThis has a citation.[citation needed]", None, "citation needed"
    yield c, "too_few_sentences", {}, prose(4) + '\nHe said "it is done."', None, "a closing quote ends a line"
    yield (c, "too_few_sentences", {"filter_javascript": False}, prose(4) + "\nEnable JavaScript to see this page.",
           None, "javascript rule off")
    yield (c, "too_few_sentences", {"filter_policy": False}, prose(4) + "\nRead our terms of use for more.", None,
           "policy rule off")
    yield c, "too_few_sentences", {"min_words_per_line": 1}, prose(4) + "\nYes.", None, "one-word line allowed"


def fineweb_cases() -> Iterator[Case]:
    f = "fineweb"
    good = prose(10, per_line=2)
    yield f, "empty", {}, "", "empty", "empty"
    yield f, "empty", {}, None, "empty", "null"
    yield f, "empty", {}, "\n\n  \n\t", "empty", "blank lines only"
    yield f, "empty", {}, good, None, "prose"
    yield f, "empty", {}, "x", "line_punct_ratio", "one line without punctuation"
    yield f, "empty", {}, "中文句子。", "short_line_ratio", "CJK full stop ends a line; 1 short line"
    yield f, "empty", {}, good + "\n\n\n", None, "blank lines are not lines"
    yield f, "empty", {}, " \u00a0 ", "empty", "no-break spaces are blank"
    yield f, "empty", {}, "a.", "short_line_ratio", "one short line"
    yield f, "empty", {}, good.replace("\n", " "), None, "one long line"
    nopunct = "\n".join(s[:-1] for s in prose(10).split("\n"))
    yield f, "line_punct_ratio", {}, nopunct, "line_punct_ratio", "no line ends in punctuation"
    yield f, "line_punct_ratio", {"line_punct_exclude_zero": True}, nopunct, None, "0 is excluded"
    yield f, "line_punct_ratio", {"line_punct_thr": None}, nopunct, None, "disabled"
    lines = prose(25).split("\n")
    some = "\n".join(s if i < 3 else s[:-1] for i, s in enumerate(lines))
    yield f, "line_punct_ratio", {}, some, None, "3 of 25 = 0.12 is kept"
    some2 = "\n".join(s if i < 2 else s[:-1] for i, s in enumerate(lines))
    yield f, "line_punct_ratio", {}, some2, "line_punct_ratio", "2 of 25"
    yield (f, "line_punct_ratio", {}, "\n".join(s[:-1] + "! " for s in lines), "line_punct_ratio",
           "a space after the mark: not at the end")
    yield f, "line_punct_ratio", {}, "\n".join(s[:-1] + "?" for s in lines), None, "'?'"
    yield f, "line_punct_ratio", {}, "\n".join(s[:-1] + "。" for s in lines), None, "CJK full stop"
    yield f, "line_punct_ratio", {}, "\n".join(s[:-1] + '"' for s in lines), "line_punct_ratio", "a quote is no stop"
    yield f, "line_punct_ratio", {"stop_chars": ['"']}, "\n".join(s[:-1] + '"' for s in lines), None, "custom"
    shorts = "\n".join(f"{word(i)} {word(i + 100)}." for i in range(20)) + "\n" + prose(4, per_line=2)
    yield f, "short_line_ratio", {}, shorts, "short_line_ratio", "20 of 22 lines <= 30 chars"
    yield f, "short_line_ratio", {"short_line_thr": 0.95}, shorts, None, "0.91 <= 0.95"
    yield f, "short_line_ratio", {"short_line_thr": None}, shorts, None, "disabled"
    yield f, "short_line_ratio", {"short_line_length": 5}, shorts, None, "no line of 5 characters or fewer"
    for k in (1, 2, 4, 6):
        t = "\n".join(f"{word(i)} {word(i + 100)}." for i in range(k)) + "\n" + prose(10, per_line=2)
        yield f, "short_line_ratio", {}, t, None, f"{k} short of {k + 5}"
    yield f, "short_line_ratio", {}, "\n".join("x" * 30 + "." for _ in range(1)), None, "31 chars is long"
    yield f, "short_line_ratio", {}, "x" * 29 + ".", "short_line_ratio", "30 chars is short"
    dup = good + "\n" + good.split("\n")[0]
    yield f, "char_dup_ratio", {}, dup, "char_dup_ratio", "one repeated line"
    yield f, "char_dup_ratio", {"char_duplicates_ratio": 0.5}, dup, None, "loose threshold"
    yield f, "char_dup_ratio", {"char_duplicates_ratio": None}, dup, None, "disabled"
    yield f, "char_dup_ratio", {}, prose(200, per_line=2) + "\nOk.", None, "no repeat"
    yield f, "char_dup_ratio", {}, prose(200, per_line=2) + "\nOk.\nOk.", None, "3 chars of many"
    yield f, "char_dup_ratio", {}, prose(20, per_line=2) + "\nOk then.\nOk then.", "char_dup_ratio", "8 of ~700"
    yield f, "char_dup_ratio", {}, good + "\n\n" + good.split("\n")[0].upper(), None, "case matters"
    yield f, "char_dup_ratio", {}, good + "\n " + good.split("\n")[0], None, "leading space makes it differ"
    yield f, "char_dup_ratio", {}, good + "\n\n\n" + good.split("\n")[0], "char_dup_ratio", "blank lines skipped"
    yield f, "char_dup_ratio", {}, good + "\r\n" + good.split("\n")[0] + "\r", None, "'\\r' is kept in lines"
    listy = "\n".join(f"{word(i)}." for i in range(40))
    yield f, "list_ratio", {"short_line_thr": None}, listy, "list_ratio", "39 newlines / 80 words"
    yield f, "list_ratio", {"short_line_thr": None, "new_line_ratio": 0.6}, listy, None, "0.49 <= 0.6"
    yield f, "list_ratio", {"short_line_thr": None, "new_line_ratio": None}, listy, None, "disabled"
    yield f, "list_ratio", {}, good, None, "prose"
    yield (f, "list_ratio", {"short_line_thr": None, "char_duplicates_ratio": None}, good.replace(" ", "\n"), "list_ratio",
           "one word per line")
    yield f, "list_ratio", {}, good.replace("\n", "\n\n\n\n\n\n\n\n"), "list_ratio", "blank lines count as newlines"
    for k in (2, 3, 4):
        yield f, "list_ratio", {}, good.replace("\n", "\n" * k), None, f"{k} newlines between lines"
    yield (f, "list_ratio", {"short_line_thr": None}, "\n".join(f"{word(i)} {word(i + 1)} ." for i in range(40)),
           "list_ratio", "39 newlines / 120 words = 0.325")


def refinedweb_cases() -> Iterator[Case]:
    r = "refinedweb"
    good = prose(10)
    yield r, "empty", {}, "", "empty", "empty"
    yield r, "empty", {}, None, "empty", "null"
    yield r, "empty", {}, "   ", "empty", "whitespace: no word"
    yield r, "empty", {}, "...", "empty", "punctuation: no word"
    yield r, "empty", {}, "ALL CAPS LINE", "empty", "the only line is dropped"
    yield r, "empty", {}, good, None, "prose"
    yield r, "empty", {}, "12345", "empty", "all digits"
    yield r, "empty", {}, "one", "empty", "a one-word line"
    yield r, "empty", {}, "Two words", None, "two words"
    yield r, "empty", {"min_line_words": None}, "one", None, "rule off"
    for extra, want, note in [
        ("\nSHOUT LOUD NOW", None, "3 of 83 words"), ("\n" + "SHOUT LOUD NOW PLEASE " * 2, "word_removal_ratio",
                                                         "8 of 88 words"),
        ("\n42\n43\n44", None, "digit lines"),
        ("\n12 likes\n3.4k views\n7 comments", "word_removal_ratio", "counters: 6 of 86 words"),
        ("\n" + "\n".join(["12 likes"] * 5), "word_removal_ratio", "5 counters: 10 of 90 words"),
        ("\nItems in cart", None, "'items in cart' removed"), ("\nRead more...", None, "'Read more...' removed"),
        ("\nSign-in", None, "'Sign-in' removed"), ("\nHello\nWorld\nAgain", None, "3 one-word lines of 83"),
        ("\nHello\nWorld\nAgain\nMore\nStuff", "word_removal_ratio", "5 of 85 = 0.059"),
    ]:
        yield r, "word_removal_ratio", {}, good + extra, want, note
    yield r, "word_removal_ratio", {"max_removed_ratio": 0.2}, good + "\n" + "SHOUT LOUD NOW PLEASE " * 2, None, "loose"
    yield r, "word_removal_ratio", {"max_removed_ratio": None}, good + "\n" + "\n".join(["12 likes"] * 5), None, "off"
    yield (r, "word_removal_ratio", {"max_uppercase_ratio": None}, good + "\n" + "SHOUT LOUD NOW PLEASE " * 2, None,
           "uppercase rule off")
    yield (r, "word_removal_ratio", {"remove_counters": False}, good + "\n" + "\n".join(["12 likes"] * 5), None,
           "counter rule off")
    yield r, "word_removal_ratio", {}, good + "\n\n\n\n\n" + good, None, "newline runs shortened; no word lost"


def all_cases() -> Iterator[Case]:
    for make in (length_cases, gopher_quality_cases, gopher_repetition_cases, c4_cases, fineweb_cases,
                 refinedweb_cases):
        yield from make()
