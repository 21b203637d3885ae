"""Batch kernels shared by the heuristic steps: lines, paragraphs, words and duplicates over a whole
``text`` column at once (``pyarrow.compute`` and numpy; no per-document Python).

A split turns the column into one flat array of pieces plus, for each piece, the row it came from
(``parents``): per-document statistics are ``np.bincount(parents, weights)``. Every definition here is
stated in ``docs/curation.md``; the names below are the ones used there.
"""

from __future__ import annotations

import collections
import functools
import itertools
import sys
import threading
import unicodedata
from dataclasses import dataclass, field
from typing import Literal, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Python's ``str.isspace`` characters (what ``str.split()`` and ``str.strip()`` use), as an RE2 class body.
WS = r"\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
# ``str.splitlines`` boundaries.
LINE_BREAK = r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x{85}\x{2028}\x{2029}]"
# Unicode's Sentence_Terminal property (Unicode 16), as an RE2 class body.
STERM = (
    r"\x{21}\x{2e}\x{3f}\x{589}\x{61d}-\x{61f}\x{6d4}\x{700}-\x{702}\x{7f9}\x{837}\x{839}\x{83d}-\x{83e}"
    r"\x{964}-\x{965}\x{104a}-\x{104b}\x{1362}\x{1367}-\x{1368}\x{166e}\x{1735}-\x{1736}\x{17d4}-\x{17d5}"
    r"\x{1803}\x{1809}\x{1944}-\x{1945}\x{1aa8}-\x{1aab}\x{1b4e}-\x{1b4f}\x{1b5a}-\x{1b5b}\x{1b5e}-\x{1b5f}"
    r"\x{1b7d}-\x{1b7f}\x{1c3b}-\x{1c3c}\x{1c7e}-\x{1c7f}\x{2024}\x{203c}-\x{203d}\x{2047}-\x{2049}"
    r"\x{2cf9}-\x{2cfb}\x{2e2e}\x{2e3c}\x{2e53}-\x{2e54}\x{2e60}-\x{2e61}\x{3002}\x{a4ff}\x{a60e}-\x{a60f}"
    r"\x{a6f3}\x{a6f7}\x{a876}-\x{a877}\x{a8ce}-\x{a8cf}\x{a92f}\x{a9c8}-\x{a9c9}\x{aa5d}-\x{aa5f}"
    r"\x{aaf0}-\x{aaf1}\x{abeb}\x{fe12}\x{fe15}-\x{fe16}\x{fe52}\x{fe56}-\x{fe57}\x{ff01}\x{ff0e}\x{ff1f}"
    r"\x{ff61}\x{10a56}-\x{10a57}\x{10f55}-\x{10f59}\x{10f86}-\x{10f89}\x{11047}-\x{11048}\x{110be}-\x{110c1}"
    r"\x{11141}-\x{11143}\x{111c5}-\x{111c6}\x{111cd}\x{111de}-\x{111df}\x{11238}-\x{11239}\x{1123b}-\x{1123c}"
    r"\x{112a9}\x{113d4}-\x{113d5}\x{1144b}-\x{1144c}\x{115c2}-\x{115c3}\x{115c9}-\x{115d7}\x{11641}-\x{11642}"
    r"\x{1173c}-\x{1173e}\x{11944}\x{11946}\x{11a42}-\x{11a43}\x{11a9b}-\x{11a9c}\x{11c41}-\x{11c42}"
    r"\x{11ef7}-\x{11ef8}\x{11f43}-\x{11f44}\x{16a6e}-\x{16a6f}\x{16af5}\x{16b37}-\x{16b38}\x{16b44}"
    r"\x{16d6e}-\x{16d6f}\x{16e98}\x{1bc9f}\x{1da88}"
)
# A symbol character: Unicode punctuation (P*), symbol (S*) or control (Cc) that is not whitespace.
SYM = r"\pP\pS\x00-\x08\x0e-\x1b\x7f-\x{84}\x{86}-\x{9f}"
# English clitics split off a word's end, as spaCy's English tokenizer does (``do|n't``, ``it|'s``).
CLITIC = r"(?i)^(?P<stem>.+?)(?P<clitic>n['’]t|['’](?:s|re|ve|ll|d|m))$"
PERIOD_RUN = "\ue000"  # stands for a run of 2+ periods ("..."), one symbol word


@dataclass
class Pieces:
    """A text column split into pieces: ``values[i]`` came from row ``parents[i]``; ``counts[r]`` pieces per row."""

    values: pa.Array
    parents: np.ndarray
    counts: np.ndarray

    @property
    def n_rows(self) -> int:
        return len(self.counts)

    def per_row(self, weights: np.ndarray | None = None) -> np.ndarray:
        """Sum of ``weights`` (or the number of pieces) per row."""
        return np.bincount(self.parents, weights=weights, minlength=self.n_rows)

    def lengths(self) -> np.ndarray:
        return np.asarray(pc.utf8_length(self.values), dtype=np.int64)

    def match(self, pattern: str) -> np.ndarray:
        """A bool per piece: ``pattern`` (RE2) found in it."""
        return np.asarray(pc.match_substring_regex(self.values, pattern), dtype=bool)

    def where(self, keep: np.ndarray) -> Pieces:
        idx = np.flatnonzero(keep)
        parents = self.parents[idx]
        return Pieces(self.values.take(pa.array(idx)), parents, np.bincount(parents, minlength=self.n_rows))


def text_column(batch: pa.RecordBatch) -> pa.Array:
    """The batch's ``text`` column as ``large_string``; a null text is scored as the empty string."""
    col = batch.column("text")
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if col.type != pa.large_string():
        col = col.cast(pa.large_string())
    return pc.fill_null(col, "") if col.null_count else col


def from_lists(lists: pa.Array) -> Pieces:
    values = pc.list_flatten(lists)
    parents = np.asarray(pc.list_parent_indices(lists), dtype=np.int64)
    counts = np.asarray(pc.list_value_length(lists).fill_null(0), dtype=np.int64)
    return Pieces(values, parents, counts)


def split(text: pa.Array, pattern: str) -> Pieces:
    """``re.split(pattern, text)`` for every row (empty pieces kept)."""
    return from_lists(pc.split_pattern_regex(text, pattern))


def split_at(text: pa.Array, separator: str) -> Pieces:
    """``text.split(separator)`` for every row: :func:`split` on a literal separator, without the regex."""
    return from_lists(pc.split_pattern(text, separator))


def split_newline_runs(text: pa.Array, at_least: int = 1) -> Pieces:
    """``re.split(r"\n+", text)`` (``at_least=1``) or ``re.split(r"\n{2,}", text)`` (2) for every row, from a
    literal split at ``at_least`` newlines (a third of the regex split's time): a run longer than the
    separator leaves empty pieces (dropped, but for a row's first and last) and, with two, a piece after the
    separator may start with the run's odd newline (trimmed: it can hold at most one)."""
    if at_least not in (1, 2):
        raise ValueError(f"split_newline_runs: at_least must be 1 or 2, got {at_least}")
    pieces = split_at(text, "\n" * at_least)
    ends = np.cumsum(pieces.counts)
    starts = ends - pieces.counts
    values = pieces.values
    if at_least == 2:
        later = np.ones(len(values), dtype=bool)
        later[starts] = False
        values = pc.if_else(pa.array(later), pc.utf8_ltrim(values, characters="\n"), values)
    keep = np.asarray(pc.binary_length(values), dtype=np.int64) > 0
    keep[starts] = True
    keep[ends - 1] = True
    return Pieces(values, pieces.parents, pieces.counts).where(keep)


def splitlines(text: pa.Array) -> Pieces:
    """``str.splitlines()`` for every row: no piece after a final line break, no line in an empty text."""
    pieces = split(text, LINE_BREAK)
    ends = np.cumsum(pieces.counts) - 1
    drop_last = np.asarray(pc.match_substring_regex(text, f"(?:{LINE_BREAK})$"), dtype=bool)
    drop_last |= np.asarray(pc.utf8_length(text), dtype=np.int64) == 0
    keep = np.ones(len(pieces.parents), dtype=bool)
    keep[ends[drop_last]] = False
    return pieces.where(keep)


def strip(values: pa.Array) -> pa.Array:
    """Python's ``str.strip()`` (Arrow's whitespace is Python's)."""
    return pc.utf8_trim_whitespace(values)


def join_lines(kept: Pieces) -> pa.Array:
    """Each row's pieces joined by ``\\n`` and stripped (empty for a row without pieces)."""
    offsets = np.concatenate([[0], np.cumsum(kept.counts)]).astype(np.int64)
    lists = pa.LargeListArray.from_arrays(pa.array(offsets), kept.values.cast(pa.large_string()))
    return strip(pc.binary_join(lists, pa.scalar("\n", pa.large_string())))


def count(text: pa.Array, needle: str) -> np.ndarray:
    """Non-overlapping occurrences of ``needle`` per row, as ``str.count``."""
    return np.asarray(pc.count_substring(text, needle), dtype=np.int64)


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den``, 0 where ``den`` is 0."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(len(num), dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def duplicates(pieces: Pieces, lengths: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per row: how many pieces equal an earlier piece of the same row, and their characters."""
    if len(pieces.parents) == 0:
        zero = np.zeros(pieces.n_rows, dtype=np.int64)
        return zero, zero.copy()
    ids = np.asarray(pc.dictionary_encode(pieces.values).indices, dtype=np.int64)
    key = pieces.parents * (int(ids.max()) + 1) + ids
    _, first = np.unique(key, return_index=True)
    repeat = np.ones(len(key), dtype=bool)
    repeat[first] = False
    lengths = pieces.lengths() if lengths is None else lengths
    return pieces.per_row(repeat).astype(np.int64), pieces.per_row(np.where(repeat, lengths, 0)).astype(np.int64)


@dataclass
class Words:
    """The words of every row, in order. Per word: ``ids`` (equal ids = equal strings), ``lengths``
    (characters), ``symbol`` (made of symbol characters only); ``parents`` (its row); ``counts`` words per
    row. :attr:`values` holds the words as strings, in the same order.

    The strings are kept as ``source`` (and ``where``: each word's position in it, ``None`` when ``source``
    is the words themselves), and assembled in order on first use of :attr:`values`: the steps match and
    count the distinct words (:meth:`distinct`, one per id), which :func:`split_words` has already.
    """

    source: pa.Array
    ids: np.ndarray
    lengths: np.ndarray
    symbol: np.ndarray
    parents: np.ndarray
    counts: np.ndarray
    firsts: np.ndarray | None = None  # per id: the position of its first word (ids numbered in that order)
    where: np.ndarray | None = None
    _cum: np.ndarray | None = field(default=None, repr=False, compare=False)
    _values: pa.Array | None = field(default=None, repr=False, compare=False)

    @property
    def values(self) -> pa.Array:
        if self._values is None:
            self._values = self.source if self.where is None else self.source.take(pa.array(self.where))
        return self._values

    def distinct(self) -> pa.Array:
        """Each distinct word once, in id order (the word at each of :attr:`firsts`)."""
        if self.firsts is None:
            raise ValueError("these words were assembled without their first occurrences")
        at = self.firsts if self.where is None else self.where[self.firsts]
        return self.source.take(pa.array(at))

    def pieces(self) -> Pieces:
        return Pieces(self.values, self.parents, self.counts)

    def cum_chars(self) -> np.ndarray:
        """Characters of the words before each position (``len(values) + 1`` entries), computed once."""
        if self._cum is None:
            self._cum = np.concatenate([[0], np.cumsum(self.lengths)])
        return self._cum

    def per_row(self, weights: np.ndarray | None = None) -> np.ndarray:
        """Sum of ``weights`` (or the number of words) per row."""
        return np.bincount(self.parents, weights=weights, minlength=len(self.counts))

    def match(self, pattern: str) -> np.ndarray:
        """A bool per word: ``pattern`` (RE2) found in it, matched once per distinct word."""
        if self.firsts is None:
            return self.pieces().match(pattern)
        return np.asarray(pc.match_substring_regex(self.distinct(), pattern), dtype=bool)[self.ids]


def _chars(*categories: str) -> str:
    """Every character of the given Unicode general categories, in code point order."""
    names, codes = _categories()
    wanted = [names.index(c) for c in categories if c in names]
    return "".join(map(chr, np.flatnonzero(np.isin(codes, wanted)).tolist()))


@functools.cache
def _categories() -> tuple[list[str], np.ndarray]:
    """The general category of every code point, as an index into the category names: one scan per process,
    shared by the character sets (120 ms; picking a set's characters from it takes a few ms, from the
    categories' names 70 ms)."""
    index = collections.defaultdict(itertools.count().__next__)  # a category's number, given on first sight
    cats = map(unicodedata.category, map(chr, range(sys.maxunicode + 1)))
    codes = np.fromiter(map(index.__getitem__, cats), dtype=np.uint8, count=sys.maxunicode + 1)
    return list(index), codes


# Edge characters split off a chunk's ends, one word each (spaCy's English prefixes and suffixes, less
# their context rules): punctuation marks and brackets, quotes, currency and other symbols (So), § % = + – —.
_EDGE_ASCII = "…,:;!?¿؟¡()[]{}<>_#*&。？！，、；：～·।،۔؛٪'\"”“`‘´’‚„»«「」『』（）〔〕【】《》〈〉§%=+–—"
EDGE_CHARS = "".join(dict.fromkeys(_EDGE_ASCII + _chars("Sc", "So")))
ABBREVIATIONS = (
    "Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "Inc", "Corp", "Ltd", "Co", "vs", "Mt", "Gov", "Gen", "Rep",
    "Sen", "Prof", "Rev", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec",
    "Ala", "Ariz", "Ark", "Calif", "Colo", "Conn", "Del", "Fla", "Ga", "Ill", "Ind", "Kan", "Ky", "La", "Md",
    "Mass", "Mich", "Minn", "Miss", "Mo", "Mont", "Neb", "Nev", "Okla", "Ore", "Pa", "Tenn", "Va", "Wash", "Wis",
)
# a core that keeps a following period: a single capital at its end ("E", "U.S"), a single letter, a
# period inside ("a.m", "e.g"), or a listed abbreviation
_KEEPS_PERIOD = r"(?:^|[^\p{Lu}])\p{Lu}$|^\pL$|\.\pL$|^(?:" + "|".join(ABBREVIATIONS) + ")$"
# clitics split off a core's end: n't 's 're 've 'll 'd 'm (either apostrophe), and the apostrophe-less
# forms spaCy splits (dont -> do|nt, cannot -> can|not, im -> i|m, gonna -> gon|na), any case
CLITIC = (r"(?i)^(?P<stem>.+?)(?P<clitic>n['’]t|['’](?:s|re|ve|ll|d|m))$"
          r"|^(?P<stem2>do|does|did|is|are|was|were|have|has|had|could|would|should|ca|wo|ai|must|need)(?P<clitic2>nt)$"
          r"|^(?P<stem3>can|i|you|they|gon|wan|got)(?P<clitic3>not|m|re|na|ta)$")
_HYPHENS = r"---|--|——|-|–|—|~"
# infixes split inside a core (spaCy's English infixes): each rule is (pattern, replacement)
INFIXES = (
    (r"(\pN)([+\-*^])(\pN|-)", "\\1\ue001\\2\ue001\\3"),
    (r"(\p{Ll}|['\"”“])(\.)(\p{Lu}|['\"”“])", "\\1\ue001\\2\ue001\\3"),
    (r"(\pL)(,)(\pL)", "\\1\ue001\\2\ue001\\3"),
    (rf"([\pL\pN])({_HYPHENS})(\pL)", "\\1\ue001\\2\ue001\\3"),
    (r"([\pL\pN])([:<>=/])(\pL)", "\\1\ue001\\2\ue001\\3"),
    (r"(\.\.+|…)", "\ue001\\1\ue001"),
)
# a core holding any infix context (one pass over every core; the replacements run on those only)
_INFIX_CANDIDATE = (rf"\pN[+\-*^][\pN-]|[\p{{Ll}}'\"”“]\.[\p{{Lu}}'\"”“]|\pL,\pL|[\pL\pN](?:{_HYPHENS})\pL"
                    r"|[\pL\pN][:<>=/]\pL|\.\.|…")
_URL = r"://|^www\."
_MARK = "\ue001"
SYMBOL_CHARS = _chars("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Cc").translate(
    {ord(c): None for c in " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85"})


_CACHE: list = []  # [(text, Words)]: the last batch's words, shared by the steps that score it in turn


def words(text: pa.Array) -> Words:
    """:func:`split_words` of ``text``, remembered for the next call on the very same array (several steps
    score one batch in turn; the cached array is held, so its buffers cannot be reused by another)."""
    held = _CACHE[0] if _CACHE else None  # one read: another thread may replace the entry meanwhile
    if held is not None and _same(held[0], text):
        return held[1]
    result = split_words(text)
    _CACHE[:] = [(text, result)]
    return result


def _same(a: pa.Array, b: pa.Array) -> bool:
    if a is b:
        return True
    if a.type != b.type or len(a) != len(b) or a.offset != b.offset:
        return False
    return all((x is None and y is None) or (x is not None and y is not None and x.address == y.address
                                              and x.size == y.size) for x, y in zip(a.buffers(), b.buffers()))


def count_words(text: pa.Array) -> np.ndarray:
    """Words per row, as ``words(text).counts`` (from the cache when it holds ``text``, else without
    assembling the words)."""
    held = _CACHE[0] if _CACHE else None
    if held is not None and _same(held[0], text):
        return held[1].counts
    return split_words(text, counts_only=True)


@overload
def split_words(text: pa.Array, *, counts_only: Literal[False] = False) -> Words: ...
@overload
def split_words(text: pa.Array, *, counts_only: Literal[True]) -> np.ndarray: ...
def split_words(text: pa.Array, *, counts_only: bool = False) -> Words | np.ndarray:
    """tokenmill's word splitting (``docs/curation.md``, "Words"), for every row at once.

    Each whitespace-separated chunk becomes: its leading edge characters (one word each; a run of periods
    is one word), its core, split at infixes (``well-known`` -> ``well - known``; not in URLs), an English
    clitic split off the core's end, then its trailing edge characters (one word each, period runs whole; a
    single period stays on an abbreviation). Trims, byte ranges and a few regex passes over the cores that
    need them do the work.

    A chunk's words depend on the chunk alone, and web text repeats its chunks (a batch of 1,024 crawl
    documents has about one distinct chunk in five; most of a batch's distinct chunks were in the batches
    before it), so each distinct chunk is split once per process (:class:`Lexicon`) and its words copied to
    every occurrence; ``ids`` are numbered by first occurrence in the batch, as a dictionary encoding of the
    words themselves numbers them.
    """
    chunks = from_lists(pc.utf8_split_whitespace(text))
    enc = pc.dictionary_encode(chunks.values)
    which = np.asarray(enc.indices, dtype=np.int64)
    distinct = enc.dictionary.cast(pa.large_string())
    if counts_only:
        per_distinct = LEXICON.counts(distinct)
        return np.bincount(chunks.parents, weights=per_distinct[which], minlength=chunks.n_rows).astype(np.int64)
    at, lex = LEXICON.place(distinct)
    at = at[which]  # every chunk occurrence's place in the lexicon
    k = lex.count[at].astype(np.int64)
    pos = _positions(lex.start[at], k)
    ids, firsts = _first_occurrence_ids(lex.labels[pos], len(lex.vocab))
    parents = np.repeat(chunks.parents, k)
    return Words(lex.words, ids, lex.lengths[pos].astype(np.int64), lex.symbol[pos], parents,
                 np.bincount(parents, minlength=chunks.n_rows), firsts, where=pos)


@dataclass(frozen=True)
class LexiconView:
    """The tables of a :class:`Lexicon` at one moment (what a batch's chunk indices point into)."""

    start: np.ndarray
    count: np.ndarray
    words: pa.Array
    labels: np.ndarray
    lengths: np.ndarray
    symbol: np.ndarray
    vocab: pa.Array


class Lexicon:
    """The distinct chunks this process has split, with their words, for the batches that follow.

    A chunk's words depend on the chunk alone, so what this holds never changes a result, only what a batch
    has to split: the chunks no batch before it held. Per chunk (in the order they came): where its words
    start in the word table and how many; per word of the table: its string, a label (equal labels, equal
    strings: its index in ``vocab``), its length in characters and whether it is made of symbols only.
    Bounded by ``max_chunks`` (about 85 bytes a chunk, 45 MB at the default): a batch that would pass it
    empties the lexicon first, and then holds the working set of that batch alone.
    """

    def __init__(self, max_chunks: int = 1 << 19):
        self.max_chunks = max_chunks
        self._lock = threading.Lock()  # one batch at a time: steps may score from several threads of a process
        self.clear()

    def clear(self) -> None:
        empty = pa.nulls(0, pa.large_string())  # not pa.array([]): a Python list would make pyarrow import pandas
        self.chunks, self.words, self.vocab = empty, empty, empty
        self.start = np.zeros(0, dtype=np.int64)
        self.count = np.zeros(0, dtype=np.int32)
        self.labels = np.zeros(0, dtype=np.int64)
        self.lengths = np.zeros(0, dtype=np.int32)
        self.symbol = np.zeros(0, dtype=bool)

    def find(self, distinct: pa.Array) -> np.ndarray:
        """Each string's index among the known chunks, -1 where it is not one."""
        if not len(self.chunks) or not len(distinct):
            return np.full(len(distinct), -1, dtype=np.int64)
        return np.asarray(pc.index_in(distinct, value_set=self.chunks).fill_null(-1), dtype=np.int64)

    def counts(self, distinct: pa.Array) -> np.ndarray:
        """The number of words of each of ``distinct``, without adding the unknown ones."""
        with self._lock:
            at, count = self.find(distinct), self.count
        per = np.zeros(len(distinct), dtype=np.int64)
        known = at >= 0
        per[known] = count[at[known]]
        if not known.all():
            per[~known] = sum(p.counts for p in _chunk_parts(distinct.filter(pa.array(~known))))
        return per

    def place(self, distinct: pa.Array) -> tuple[np.ndarray, LexiconView]:
        """Each of ``distinct`` (distinct strings)'s index among the known chunks, splitting those not known,
        and the tables those indices point into (a snapshot: adding replaces the arrays, never edits them)."""
        with self._lock:
            if len(self.chunks) + len(distinct) > self.max_chunks:
                self.clear()
            at = self.find(distinct)
            new = np.flatnonzero(at < 0)
            if len(new):
                at[new] = len(self.chunks) + np.arange(len(new), dtype=np.int64)
                self._add(distinct if len(new) == len(distinct) else distinct.take(pa.array(new)))
            return at, LexiconView(self.start, self.count, self.words, self.labels, self.lengths, self.symbol,
                                   self.vocab)

    def _add(self, fresh: pa.Array) -> None:
        parts = _chunk_parts(fresh)
        per = _words_per_chunk(parts)
        values = _interleave(parts, per)
        enc = pc.dictionary_encode(values)
        label = self.find_words(enc.dictionary)
        miss = np.flatnonzero(label < 0)
        label[miss] = len(self.vocab) + np.arange(len(miss), dtype=np.int64)
        self.vocab = pa.concat_arrays([self.vocab, enc.dictionary.take(pa.array(miss))])
        self.start = np.concatenate([self.start, len(self.words) + np.cumsum(per) - per])
        self.count = np.concatenate([self.count, per.astype(np.int32)])
        self.labels = np.concatenate([self.labels, label[np.asarray(enc.indices, dtype=np.int64)]])
        self.lengths = np.concatenate([self.lengths, np.asarray(pc.utf8_length(values), dtype=np.int32)])
        self.symbol = np.concatenate([self.symbol, _symbol_only(values)])
        self.words = pa.concat_arrays([self.words, values])
        self.chunks = pa.concat_arrays([self.chunks, fresh])

    def find_words(self, words: pa.Array) -> np.ndarray:
        """Each word's label, -1 where the vocabulary lacks it."""
        if not len(self.vocab) or not len(words):
            return np.full(len(words), -1, dtype=np.int64)
        return np.asarray(pc.index_in(words, value_set=self.vocab).fill_null(-1), dtype=np.int64)


LEXICON = Lexicon()


def _first_occurrence_ids(labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``labels`` (equal labels = equal strings, each below ``n``; not every one need occur) renumbered 0, 1,
    ... by first occurrence, and the position of each new number's first occurrence."""
    first = np.full(n, len(labels), dtype=np.int64)
    np.minimum.at(first, labels, np.arange(len(labels), dtype=np.int64))
    present = np.flatnonzero(first < len(labels))
    order = present[np.argsort(first[present])]
    rank = np.zeros(n, dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return rank[labels], first[order]


def _chunk_parts(values: pa.Array) -> list[Pieces]:
    """The words of each chunk of ``values``, as four ``Pieces`` whose parents are chunk indices: leading edge
    characters, core words (split at infixes), the clitic, trailing edge characters."""
    values = values.cast(pa.large_string())
    nbytes = np.asarray(pc.binary_length(values), dtype=np.int64)
    start = _offsets(values)[:-1]
    left = pc.utf8_ltrim(values, characters=EDGE_CHARS)
    core = pc.utf8_rtrim(left, characters=EDGE_CHARS + ".")
    pre_b = nbytes - np.asarray(pc.binary_length(left), dtype=np.int64)
    core_b = np.asarray(pc.binary_length(core), dtype=np.int64)
    suf_b = nbytes - pre_b - core_b
    take_period = _period_first(values, start + pre_b + core_b, suf_b)
    take_period[take_period] = _match(core.filter(pa.array(take_period)), _KEEPS_PERIOD)
    if take_period.any():
        dot = pa.scalar(".", core.type)
        with_period = pc.binary_join_element_wise(core.filter(pa.array(take_period)), dot, pa.scalar("", core.type))
        core = pc.replace_with_mask(core, pa.array(take_period), with_period)
    core_b, suf_b = core_b + take_period, suf_b - take_period
    data = _data(values)
    stem, clitic = _clitic_split(core)
    rows = np.arange(len(nbytes))
    return [
        _symbol_tokens(_slice(data, start, pre_b)),
        _infix_split(Pieces(stem, rows, np.ones(len(rows), dtype=np.int64))),
        clitic,
        _symbol_tokens(_slice(data, start + pre_b + core_b, suf_b)),
    ]


def _words_per_chunk(parts: list[Pieces]) -> np.ndarray:
    """The parts' counts added (:func:`_chunk_parts` gives four parts, never none)."""
    total = parts[0].counts
    for part in parts[1:]:
        total = total + part.counts
    return total


def _interleave(parts: list[Pieces], k: np.ndarray) -> pa.Array:
    """The words of per-chunk token lists ``parts`` (each ``Pieces`` with ``parents`` = chunk index), chunk
    after chunk and in part order within a chunk; ``k``: words per chunk (the sum of the parts' counts)."""
    base = np.cumsum(k) - k
    order, seen = [], np.zeros(len(k), dtype=np.int64)
    for p in parts:
        order.append(_positions(base + seen, p.counts))
        seen = seen + p.counts
    order = np.concatenate(order)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return pa.concat_arrays([p.values.cast(pa.large_string()) for p in parts]).take(pa.array(inverse))


def _symbol_only(values: pa.Array) -> np.ndarray:
    """Per word: made of symbol characters only."""
    return np.asarray(pc.binary_length(pc.utf8_ltrim(values, characters=SYMBOL_CHARS)), dtype=np.int64) == 0


def _assemble(parts: list[Pieces], chunks: Pieces) -> Words:
    """Interleave per-chunk token lists ``parts`` (each ``Pieces`` with ``parents`` = chunk index) in order."""
    k = _words_per_chunk(parts)
    values = _interleave(parts, k)
    parents = np.repeat(chunks.parents, k)
    ids = np.asarray(pc.dictionary_encode(values).indices, dtype=np.int64)
    return Words(values, ids, np.asarray(pc.utf8_length(values), dtype=np.int64), _symbol_only(values),
                 parents, np.bincount(parents, minlength=chunks.n_rows))


def _match(values: pa.Array, pattern: str) -> np.ndarray:
    return np.asarray(pc.match_substring_regex(values, pattern), dtype=bool)


def _offsets(values: pa.Array) -> np.ndarray:
    return np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset: values.offset + len(values) + 1]


def _data(values: pa.Array) -> np.ndarray:
    buf = values.buffers()[2]
    return np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, dtype=np.uint8)


def _slice(data: np.ndarray, start: np.ndarray, length: np.ndarray) -> Pieces:
    """Strings ``data[start[i] : start[i] + length[i]]`` (byte ranges on character boundaries), one per chunk."""
    offsets = np.concatenate([[0], np.cumsum(length)]).astype(np.int64)
    body = data[_positions(start, length)] if offsets[-1] else np.zeros(0, dtype=np.uint8)
    values = pa.LargeStringArray.from_buffers(len(length), pa.py_buffer(offsets), pa.py_buffer(body.tobytes()))
    return Pieces(values, np.arange(len(length)), np.ones(len(length), dtype=np.int64))


def _period_first(values: pa.Array, at: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Whether the trailing edge starting at byte ``at`` is a single period (not a run)."""
    data = _data(values)
    out = np.zeros(len(at), dtype=bool)
    has = n > 0
    out[has] = data[at[has]] == 46
    two = has & (n > 1)
    out[two] &= data[at[two] + 1] != 46
    return out


def _clitic_split(core: pa.Array) -> tuple[pa.Array, Pieces]:
    """Each core without its clitic, and the clitics (``Pieces`` whose parents are core indices)."""
    rows = np.arange(len(core))
    candidate = np.flatnonzero(_match(core, r"['’]|[nN][tT]$|^(?i:cannot|im|youre|theyre|gonna|wanna|gotta)$"))
    parts = pc.extract_regex(core.take(pa.array(candidate)), CLITIC) if len(candidate) else None
    if parts is None or parts.null_count == len(parts):
        return core, Pieces(pa.array([], pa.large_string()), rows[:0], np.zeros(len(core), dtype=np.int64))
    valid = np.asarray(pc.is_valid(parts), dtype=bool)
    parts = parts.filter(pa.array(valid))
    idx = candidate[valid]
    empty = pa.scalar("", parts.type.field(0).type)
    stems = pc.binary_join_element_wise(*(pc.struct_field(parts, f) for f in ("stem", "stem2", "stem3")), empty)
    clitics = pc.binary_join_element_wise(*(pc.struct_field(parts, f) for f in ("clitic", "clitic2", "clitic3")),
                                          empty)
    mask = np.zeros(len(core), dtype=bool)
    mask[idx] = True
    core = pc.replace_with_mask(core, pa.array(mask), stems.cast(core.type))
    return core, Pieces(clitics.cast(pa.large_string()), idx, np.bincount(idx, minlength=len(core)))


def _nonempty(pieces: Pieces) -> Pieces:
    return pieces.where(np.asarray(pc.binary_length(pieces.values), dtype=np.int64) > 0)


def _grouped(parts: list[Pieces], n_rows: int) -> Pieces:
    """Several ``Pieces`` of the same rows as one, ordered by row (stable: order within a row kept)."""
    parents = np.concatenate([p.parents for p in parts])
    order = np.argsort(parents, kind="stable")
    values = pa.concat_arrays([p.values.cast(pa.large_string()) for p in parts]).take(pa.array(order))
    return Pieces(values, parents[order], np.bincount(parents, minlength=n_rows))


def _infix_split(cores: Pieces) -> Pieces:
    """Cores split at infixes into one or more words; empty cores give none."""
    cores = _nonempty(cores)
    todo = _match(cores.values, _INFIX_CANDIDATE)
    todo[todo] = ~_match(cores.values.filter(pa.array(todo)), _URL)
    if not todo.any():
        return cores
    sub = cores.values.filter(pa.array(todo))
    for pattern, repl in INFIXES:
        new = pc.replace_substring_regex(sub, pattern, repl)
        changed = ~np.asarray(pc.equal(new, sub), dtype=bool)  # a replacement always adds a mark
        if changed.any():  # a second pass catches overlapping neighbours (a-b-c), where the first matched
            again = pc.replace_substring_regex(new.filter(pa.array(changed)), pattern, repl)
            new = pc.replace_with_mask(new, pa.array(changed), again)
        sub = new
    pieces = from_lists(pc.split_pattern(sub, _MARK))
    split_parents = cores.parents[todo][pieces.parents]
    split = _nonempty(Pieces(pieces.values, split_parents, np.bincount(split_parents, minlength=cores.n_rows)))
    return _grouped([cores.where(~todo), split], cores.n_rows)


def _symbol_tokens(runs: Pieces) -> Pieces:
    """Edge runs split into words: one per character, a run of periods whole. From the UTF-8 bytes: a word
    starts at each run's first byte and at every character's first byte that is not a period after a period."""
    runs = _nonempty(runs)
    if len(runs.parents) == 0:
        return runs
    off = _offsets(runs.values)
    lo = int(off[0])
    body = _data(runs.values)[lo: int(off[-1])]
    begins = (body & 0xC0) != 0x80
    period = body == 46
    begins[1:] &= ~(period[1:] & period[:-1])
    begins[off[:-1] - lo] = True
    at = np.flatnonzero(begins)
    offsets = np.append(at, len(body)).astype(np.int64)
    values = pa.LargeStringArray.from_buffers(len(at), pa.py_buffer(offsets), pa.py_buffer(body.tobytes()))
    parents = runs.parents[np.searchsorted(off[1:] - lo, at, side="right")]
    return Pieces(values, parents, np.bincount(parents, minlength=runs.n_rows))


def _positions(start: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``start[i] + j`` for ``j < counts[i]``, for every ``i``, flattened."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.asarray(start, dtype=np.int64) - (np.cumsum(counts) - counts)  # start[i] less the i-th group's first slot
    out = np.repeat(shift, counts)
    out += np.arange(total, dtype=np.int64)
    return out
