"""Start-up parity check of the fast encoder against the reference encoder.

The fast path is used only when it returns exactly the reference ids on every text of a varied built-in
sample (plus the caller's own texts). Otherwise the reference path is used and a warning names the text
that differed.

The verdict is cached under ``$TOKENMILL_CACHE/parity/`` (default ``~/.cache/tokenmill``), keyed by the
tokenizer's fingerprint, a digest of every text checked, and the gigatoken and check versions: building
the fast encoder and running the check costs about a second for a 150k-token vocabulary, and a run that
finds its verdict cached builds the fast encoder only where it encodes (in the workers).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from tokenmill.tokenize.sources import cache_dir

CHECK_VERSION = 1  # bump when the check itself changes, so older verdicts are not trusted

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
    """Describe the first text the two encoders disagree on, or None when they agree on all.

    The fast encoder encodes text by text, as a pool's workers do (tokenize/tokenizer.py); its batch call
    returns the same ids (tests/tokenize) and would import ``awkward`` here, a fifth of the check's time."""
    for text in texts:
        ids = fast.encode(text).tolist()
        want = reference.encode(text)
        if ids != want:
            at = next((i for i, (a, b) in enumerate(zip(ids, want)) if a != b), min(len(ids), len(want)))
            return (f"text {text[:60]!r} differs at token {at}: fast {ids[at:at + 4]} vs reference "
                    f"{want[at:at + 4]}")
    return None


def choose_fast(reference, *, name: str, parity_sample: Sequence[str] | None, fingerprint: str | None = None,
                build=None):
    """(use the fast path, its encoder or None when not built): the gigatoken encoder when it loads and
    agrees with ``reference``; (False, None) with a warning otherwise.

    With a ``fingerprint``, a cached verdict for the same tokenizer and texts is used instead of the check:
    then the encoder is not built here ((True, None)); the caller builds it where it encodes. ``build``: how
    to get the fast encoder (default ``reference.fast()``).
    """
    texts = SAMPLE + list(parity_sample or [])
    key = verdict_key(fingerprint, texts) if fingerprint else None
    cached = read_verdict(key) if key else None
    if cached is not None:
        if cached.get("problem"):
            _warn(name, reference, cached["problem"])
            return False, None
        return True, None
    fast, problem = _check(reference, texts, build or reference.fast)
    if key:
        write_verdict(key, problem)
    if problem:
        _warn(name, reference, problem)
        return False, None
    return True, fast


def agreement_cached(fingerprint: str, parity_sample: Sequence[str] | None) -> bool:
    """Whether a verdict "the fast path agrees" is cached for this tokenizer and these texts."""
    verdict = read_verdict(verdict_key(fingerprint, SAMPLE + list(parity_sample or [])))
    return verdict is not None and not verdict.get("problem")


def _check(reference, texts: list[str], build):
    """(fast encoder, None) when it loads and agrees; (None, what went wrong) otherwise."""
    try:
        fast = build()
    except Exception as exc:  # noqa: BLE001 -- gigatoken rejects some tokenizer shapes; the reference still works
        return None, f"fast path unavailable ({type(exc).__name__}: {exc})"
    problem = first_mismatch(fast, reference, texts)
    return (None, f"fast path disagrees with {reference.backend} ({problem})") if problem else (fast, None)


def _warn(name: str, reference, problem: str) -> None:
    warnings.warn(f"tokenizer {name!r}: {problem}; using the {reference.backend} reference path", stacklevel=4)


def verdict_key(fingerprint: str, texts: Sequence[str]) -> str:
    """Cache key of one parity verdict: tokenizer, every text checked, gigatoken and check versions."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        giga = version("gigatoken")
    except PackageNotFoundError:
        giga = "none"
    h = hashlib.sha256(f"{CHECK_VERSION}\0{giga}\0{fingerprint}\0".encode())
    for text in texts:
        h.update(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
    return h.hexdigest()


def _verdict_path(key: str) -> Path:
    return cache_dir() / "parity" / f"{key}.json"


def read_verdict(key: str) -> dict | None:
    """The cached verdict ``{"problem": str | None}``, or None when there is none (or it is unreadable)."""
    try:
        verdict = json.loads(_verdict_path(key).read_bytes())
    except (OSError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) and "problem" in verdict else None


def write_verdict(key: str, problem: str | None) -> None:
    path = _verdict_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"problem": problem}))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the check next time
