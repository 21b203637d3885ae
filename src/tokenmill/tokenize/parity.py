"""Start-up parity check of the fast encoder against the reference encoder.

The fast path is used only when it returns exactly the reference ids on every text of a varied built-in
sample (plus the caller's own texts). Otherwise the reference path is used and a warning names the text
that differed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

SAMPLE = [
    "The quick brown fox jumps over the lazy dog. It's 9:41 AM; they'll say \"hello\" and we've gone.",
    "def f(x, *, y=3):\n    return {'a': [x ** 2 for _ in range(y)]}  # comment\n\n\tif x != y: pass\n",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "Emoji 🎉🚀👩‍👩‍👧 and flags 🇫🇷 plus ZWJ\u200dmid and combining e\u0301 é ﬁ",
    "   leading spaces, runs    of     spaces\n\n\n\ntrailing tabs\t\t \r\n  ",
    "Numbers 1234567890 3.14159 -42 1e-9 0x1F 1,000,000 2024-05-01 ½ ²",
    "Special-looking text: <|endoftext|> <|im_start|>user <s> </s> [INST] [/INST] <unk> <pad>",
    "Ünïcödé façade naïve coöperate — “quotes” ‘single’ … ¿Qué? Привет мир! مرحبا שלום नमस्ते",
    "",
    " ",
    "a",
    "\n",
    "URL https://example.com/a?b=c&d=e#f and e-mail first.last+tag@example.org",
    "ALL CAPS SHOUTING AND MiXeD CaSe WoRdS don't DON'T I'M",
]


def first_mismatch(fast, reference, texts: Sequence[str]) -> str | None:
    """Describe the first text the two encoders disagree on, or None when they agree on all."""
    got = fast.encode_batch_list(list(texts), parallel=False)
    for text, ids in zip(texts, got):
        want = reference.encode(text)
        if list(ids) != want:
            at = next((i for i, (a, b) in enumerate(zip(ids, want)) if a != b), min(len(ids), len(want)))
            return (f"text {text[:60]!r} differs at token {at}: fast {list(ids[at:at + 4])} vs reference "
                    f"{want[at:at + 4]}")
    single = fast.encode(texts[0]).tolist() if texts else []
    if texts and single != reference.encode(texts[0]):
        return f"single-text encode of {texts[0][:60]!r} differs from the reference"
    return None


def choose_fast(reference, *, name: str, parity_sample: Sequence[str] | None):
    """The gigatoken encoder when it loads and agrees with ``reference``; None (with a warning) otherwise."""
    try:
        fast = reference.fast()
    except Exception as exc:  # noqa: BLE001 -- gigatoken rejects some tokenizer shapes; the reference still works
        warnings.warn(f"tokenizer {name!r}: fast path unavailable ({type(exc).__name__}: {exc}); "
                      f"using the {reference.backend} reference path", stacklevel=3)
        return None
    texts = SAMPLE + list(parity_sample or [])
    problem = first_mismatch(fast, reference, texts)
    if problem is not None:
        warnings.warn(f"tokenizer {name!r}: fast path disagrees with {reference.backend} ({problem}); "
                      f"using the {reference.backend} reference path", stacklevel=3)
        return None
    return fast
