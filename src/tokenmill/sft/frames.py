"""What differs between a source's prompts: each prompt without the template many of them share.

Prompts rendered into one template (Alpaca's "Below is an instruction that describes a task. ...\\n\\n###
Instruction:\\n{x}\\n\\n### Response:") share most of their word bigrams, so MinHash puts them all in one
cluster and ``sft select`` keeps one example of the whole source (7,644 of 7,673 prompts in one cluster in a
trial; 87 of Dolly's 151). Clustering reads each prompt without its *frame*: the longest prefix (and,
apart, suffix) that it shares with at least ``share`` of its source's prompts, when those prompts are mostly
different after it (so copies and rewordings of one question, which share their whole text, are not a
template and still cluster), the frame cut back to a word boundary and at least ``MIN_WORDS`` words long (a
common opening such as "What is the" stays). A prompt that would be left empty keeps its whole text.

Algorithm: sort the source's prompts; the prompts sharing a prefix are then contiguous, and the longest
prefix shared by the ``m`` prompts of the window ``sorted[i:i + m]`` is the common prefix of its first and
last (found by binary search over slices). A window counts when at least half of its prompts differ from
each other. Each prompt takes the longest prefix among the counted windows holding it (a sliding maximum).
Suffixes: the same over the reversed prompts. The frames are found in a sample of ``SAMPLE`` prompts of the
source, evenly spread (a template shared by a fifth of the source is in a fifth of the sample), then cut
from every prompt that starts (ends) with one. Cost: a sort and ``SAMPLE`` common-prefix searches of
``O(log length)`` slice comparisons per source and side, then a ``startswith`` per prompt and frame (a few
frames: each holds a fifth of the sample): about 2 s per million prompts, where their MinHash takes 140 s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SHARE = 0.2  # a frame is shared by at least this share of a source's prompts
MIN_PROMPTS = 4  # ... and by at least this many
MIN_WORDS = 6  # shorter shared openings (or endings) are not a template
SAMPLE = 2000  # frames are found in this many prompts of a source, evenly spread, then cut from all of them


def without_frames(texts: Sequence[str], groups: Sequence[str]) -> list[str]:
    """``texts`` without the frame each shares with many texts of its group (its source)."""
    out = list(texts)
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    for rows in by_group.values():
        for i, text in zip(rows, strip_frames([texts[i] for i in rows])):
            out[i] = text
    return out


def strip_frames(texts: list[str]) -> list[str]:
    """Each of ``texts`` without its shared prefix and suffix (whole when nothing would be left)."""
    sample = texts[::max(1, -(-len(texts) // SAMPLE))]  # evenly spread over the source
    heads = _frames(sample)
    tails = [t[::-1] for t in _frames([t[::-1] for t in sample])]
    if not heads and not tails:
        return texts
    return [_core(text, heads, tails) for text in texts]


def _core(text: str, heads: list[str], tails: list[str]) -> str:
    """``text`` without the longest of ``heads`` it starts with and of ``tails`` it ends with (whole when that
    leaves nothing)."""
    start, stop = 0, len(text)
    for h in heads:
        if text.startswith(h):
            start = len(h)
            break
    for t in tails:
        if text.endswith(t) and start + len(t) <= stop:
            stop -= len(t)
            break
    core = text[start:stop]
    return core if core.strip() else text


def _frames(texts: list[str]) -> list[str]:
    """The frame prefixes of ``texts``, longest first: of each text, the longest prefix it shares with at least
    ``m`` texts of a window of mostly different ones, cut back to a word boundary, of ``MIN_WORDS`` or more."""
    m = max(MIN_PROMPTS, int(np.ceil(SHARE * len(texts))))
    if len(texts) < m:
        return []
    s = sorted(texts)
    n = len(s)
    changes = np.r_[0, np.cumsum([s[k] != s[k + 1] for k in range(n - 1)], dtype=np.int64)]
    starts = np.arange(n - m + 1)
    distinct = 1 + changes[starts + m - 1] - changes[starts]  # different texts in each window
    lcp = np.array([_common_prefix(s[i], s[i + m - 1]) for i in starts], dtype=np.int64)
    lcp[distinct < (m + 1) // 2] = 0
    pad = np.zeros(m - 1, dtype=np.int64)
    best = _sliding_max(np.r_[pad, lcp, pad], m)  # of the windows holding sorted text j
    frames = {s[j][:_frame(s[j], int(length))] for j, length in enumerate(best) if length}
    return sorted(frames - {""}, key=len, reverse=True)


def _frame(text: str, length: int) -> int:
    """``length`` cut back to just after the last whitespace in ``text[:length]``; 0 when under MIN_WORDS."""
    cut = length
    while cut < len(text) and cut > 0 and not text[cut - 1].isspace():  # a word the frame ends inside is kept
        cut -= 1
    return cut if len(text[:cut].split()) >= MIN_WORDS else 0


def _common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the longest k with a[:k] == b[:k]: slices compare in C
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _sliding_max(x: np.ndarray, w: int) -> np.ndarray:
    """``max(x[i:i + w])`` for every ``i`` (van Herk / Gil-Werman: O(n) for any ``w``)."""
    n = len(x) - w + 1
    k = -(-len(x) // w)
    padded = np.zeros(k * w, dtype=x.dtype)
    padded[:len(x)] = x
    blocks = padded.reshape(k, w)
    ahead = np.maximum.accumulate(blocks, axis=1).ravel()  # max from the block's start to here
    behind = np.maximum.accumulate(blocks[:, ::-1], axis=1)[:, ::-1].ravel()  # max from here to the block's end
    i = np.arange(n)
    return np.maximum(behind[i], ahead[i + w - 1])
