"""Split a JSON array into its elements without parsing them, so one damaged element loses only itself.

The scanner finds element boundaries (commas and the closing bracket at the array's own level) by
tracking strings, escapes and brackets; each element is then parsed alone with ``orjson``. It resyncs
after damage: a raw newline inside a string ends that string (JSON strings cannot hold one); a closing
bracket that does not match the innermost opener closes up to the opener it matches; a ``]`` with no
``[`` open in the element closes the array; and a bracket right after a comma inside an object (where a
member's key must come) starts the next element. Damage that none of these catch (an unterminated string
on a one-line array) costs the rest of the array, reported as one ``unreadable`` element at the end.

Bounds, checked while scanning and so before any parsing: an element nested deeper than ``max_depth``
or longer than ``max_bytes`` is skipped (its bytes are not kept) and reported. Memory is one element
(at most ``max_bytes``) plus one read chunk, whatever the file size or nesting depth.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

MAX_DEPTH = 128  # nesting levels of one record; orjson.dumps stops at 255
MAX_RECORD_BYTES = 1 << 30
CHUNK = 1 << 16
_OUT = re.compile(rb'[\[\]{},"]')
_IN = re.compile(rb'["\\\n]')
_PAIRS = {ord("]"): ord("["), ord("}"): ord("{")}


@dataclass
class Element:
    index: int  # 1-based position in the array
    data: bytes | None  # the element's bytes; None when it was skipped
    problem: str = ""  # "too_deep", "too_long" or "unterminated" (the file ends inside the element)


def too_deep(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """True when one JSON text nests brackets more than ``limit`` levels deep (strings not counted).

    Counts brackets first: a text with at most ``limit`` of them cannot be too deep, and is not scanned.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    depth = pos = 0
    in_string = False
    while (m := (_IN if in_string else _OUT).search(data, pos)) is not None:
        c, pos = data[m.start()], m.end()
        if in_string:
            pos += 1 if c == ord("\\") else 0
            in_string = c == ord("\\")  # an escape keeps the string open
        elif c == ord('"'):
            in_string = True
        elif c in (ord("["), ord("{")):
            depth += 1
            if depth > limit:
                return True
        elif c in (ord("]"), ord("}")):
            depth -= 1
    return False


def nesting_depth(data: bytes) -> int:
    """The deepest bracket nesting of a valid JSON text (brackets inside strings not counted), in a few numpy
    passes: a quote counts unless an odd run of backslashes stands right before it, and a bracket lies in a
    string when an odd number of counted quotes stands before it. Only for text a JSON parser has accepted."""
    raw = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(raw == 0x22)
    slashes = np.flatnonzero(raw == 0x5C)
    if len(quotes) and len(slashes):
        quotes = quotes[_backslashes_before(quotes, slashes) % 2 == 0]
    folded = raw | 0x20  # "[" -> "{" and "]" -> "}", no other byte lands on either
    opens, closes = (b[np.searchsorted(quotes, b) % 2 == 0] for b in (np.flatnonzero(folded == 0x7B),
                                                                      np.flatnonzero(folded == 0x7D)))
    if not len(opens):
        return 0
    steps = np.concatenate([np.ones(len(opens), np.int64), -np.ones(len(closes), np.int64)])
    order = np.argsort(np.concatenate([opens, closes]), kind="stable")
    return int(np.cumsum(steps[order]).max())


def _backslashes_before(at: np.ndarray, slashes: np.ndarray) -> np.ndarray:
    """How many backslashes stand in an unbroken run right before each position of ``at``."""
    starts = np.ones(len(slashes), dtype=bool)
    starts[1:] = np.diff(slashes) != 1
    run_start = np.maximum.accumulate(np.where(starts, np.arange(len(slashes)), 0))
    k = np.searchsorted(slashes, at) - 1  # the last backslash before each position
    last = slashes[np.maximum(k, 0)]
    return np.where((k >= 0) & (last == at - 1), k - run_start[np.maximum(k, 0)] + 1, 0)


class Readable(Protocol):
    """What the scanner reads: a binary stream's ``read``."""

    def read(self, n: int = -1, /) -> bytes: ...


class ArrayScanner:
    """Yields the elements of a JSON array from ``stream``, positioned just after the opening ``[``."""

    def __init__(self, stream: Readable, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_RECORD_BYTES):
        self.stream, self.max_depth, self.max_bytes = stream, max_depth, max_bytes
        self.buf = bytearray()
        self.pos = self.start = 0
        self.stack = bytearray()  # open brackets inside the current element (bounded by max_depth)
        self.extra_depth = 0  # levels past max_depth, counted but not stacked
        self.in_string = False
        self.problem = ""
        self.index = 0
        self.closed = False  # the array's closing bracket was seen

    def __iter__(self) -> Iterator[Element]:
        while True:
            if self.pos >= len(self.buf) and not self._refill():
                yield from self._at_eof()
                return
            element = self._step()
            if element is not None:
                yield element
            if self.closed:
                return

    def _refill(self) -> bool:
        keep = min(self.pos, len(self.buf)) if self.problem else self.start  # a skipped element is not kept
        del self.buf[:keep]
        self.pos -= keep
        self.start = max(0, self.start - keep)
        chunk = self.stream.read(CHUNK)
        if not chunk:
            return False
        self.buf += chunk
        if not self.problem and self.pos - self.start > self.max_bytes:
            self.problem = "too_long"
        return True

    def _at_eof(self) -> Iterator[Element]:
        if self.problem or bytes(self.buf[self.start:]).strip():
            self.index += 1
            yield Element(self.index, None, self.problem or "unterminated")

    def _step(self) -> Element | None:
        if self.in_string:
            m = _IN.search(self.buf, self.pos)
            if m is None:
                self.pos = len(self.buf)
                return None
            c, self.pos = self.buf[m.start()], m.end()
            if c == ord("\\"):
                self.pos += 1
            else:
                self.in_string = False  # a closing quote, or a raw newline that no string may hold
            return None
        m = _OUT.search(self.buf, self.pos)
        if m is None:
            self.pos = len(self.buf)
            return None
        c, self.pos = self.buf[m.start()], m.end()
        if c == ord('"'):
            self.in_string = True
        elif c in (ord("["), ord("{")):
            cut = self._impossible_comma(m.start())
            if cut >= 0:  # "{... , {": an object member cannot start with a bracket: a broken element ended
                element = self._emit(cut, resume=cut + 1)
                self._open(c)
                return element
            self._open(c)
        elif c in (ord("]"), ord("}")):
            if not self.extra_depth and (not self.stack or (c == ord("]") and ord("[") not in self.stack)):
                self.closed = True  # the array's own closing bracket (after a broken element, perhaps)
                return self._emit(m.start())
            self._close(c)
        elif not self.stack and not self.extra_depth:  # a comma between elements
            return self._emit(m.start())
        return None

    def _open(self, c: int) -> None:
        if len(self.stack) < self.max_depth:
            self.stack.append(c)
        else:
            self.extra_depth += 1
            self.problem = self.problem or "too_deep"

    def _close(self, c: int) -> None:
        if self.extra_depth:
            self.extra_depth -= 1
            return
        opener = _PAIRS[c]
        if opener in self.stack:  # close up to the matching opener: resyncs after a mismatched bracket
            del self.stack[self.stack.rindex(opener):]
        # a closer with no opener in this element is left for the parser to reject

    def _impossible_comma(self, at: int) -> int:
        """Position of the comma just before ``at`` when the element is one open object, else -1."""
        if self.stack != b"{" or self.extra_depth or self.problem:
            return -1
        j = at - 1
        while j >= self.start and self.buf[j] in b" \t\r\n":
            j -= 1
        return j if j >= self.start and self.buf[j] == ord(",") else -1

    def _emit(self, end: int, resume: int | None = None) -> Element | None:
        data, problem = bytes(self.buf[self.start:end]), self.problem
        self.start, self.problem = self.pos if resume is None else resume, ""
        self.stack.clear()
        self.extra_depth = 0
        if not problem and not data.strip():
            return None  # "[]" or a trailing comma: no element
        self.index += 1
        return Element(self.index, None if problem else data, problem)
