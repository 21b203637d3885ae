"""Character classes of Arrow strings found with numpy: a code point table and the bytes of its members.

Shared by :mod:`~tokenmill.curate.dedup.nfkc` and :mod:`~tokenmill.curate.dedup.punctuation`. A table is a
bool array over every code point, written as hex ranges. Most non-ASCII characters are settled by their
first two UTF-8 bytes alone (all 64 or 4096 code points behind them are members); only the others are
decoded.
"""

from __future__ import annotations

import numpy as np


def table(ranges: str) -> np.ndarray:
    """A bool array over every code point, True on the hex ranges (``"A1-A7 A9 ..."``)."""
    out = np.zeros(0x110000, dtype=bool)
    for item in ranges.split():
        lo, _, hi = item.partition("-")
        out[int(lo, 16):int(hi or lo, 16) + 1] = True
    return out


def prefixes(members: np.ndarray) -> np.ndarray:
    """``out[b0 << 8 | b1]``: every code point whose UTF-8 starts with bytes ``b0 b1`` is a member."""
    out = np.zeros(1 << 16, dtype=bool)
    b1 = np.arange(0x80, 0xC0)
    blocks3 = np.all(members[:0x10000].reshape(-1, 64), axis=1)
    blocks4 = np.all(members.reshape(-1, 4096), axis=1)  # 272 blocks: F4 90 and above is not UTF-8
    for b0 in range(0xC2, 0xF5):
        if b0 < 0xE0:
            ok = members[(b0 & 0x1F) << 6 | (b1 & 0x3F)]
        elif b0 < 0xF0:
            ok = blocks3[(b0 & 0x0F) << 6 | (b1 & 0x3F)]
        else:
            ok = blocks4[np.minimum((b0 & 0x07) << 6 | (b1 & 0x3F), len(blocks4) - 1)]
        out[b0 << 8 | b1] = ok
    return out


def outside(raw: np.ndarray, lo: int, hi: int, members: np.ndarray,
            settled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte position and byte length of every non-ASCII code point of ``raw[lo:hi]`` that is not a member
    (``settled = prefixes(members)``)."""
    lead = np.flatnonzero(raw[lo:hi] >= 0xC0) + lo  # the first byte of every non-ASCII code point
    lead = lead[~settled[raw[lead].astype(np.int64) << 8 | raw[lead + 1]]]
    code, size = decode(raw, lead)
    out = ~members[code]
    return lead[out], size[out]


def decode(raw: np.ndarray, lead: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Code point and byte length of the UTF-8 sequences starting at ``lead`` (valid UTF-8, non-ASCII)."""
    b0, b1, b2, b3 = (raw[np.minimum(lead + k, len(raw) - 1)].astype(np.int64) for k in range(4))
    size = 2 + (b0 >= 0xE0) + (b0 >= 0xF0)
    two = (b0 & 0x1F) << 6 | (b1 & 0x3F)
    three = (b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F)
    four = (b0 & 0x07) << 18 | (b1 & 0x3F) << 12 | (b2 & 0x3F) << 6 | (b3 & 0x3F)
    return np.select([size == 2, size == 3], [two, three], four), size
