"""Rendered chats through the fast encoder: the text between control tokens in one batched call, offsets from
token byte lengths.

What :meth:`Tokenizer.encode_rendered_batch` returns is, by definition, the text split at its control spans
with every piece encoded as ordinary text and every control span its one control id (the whole-text
reference encoding is used only where it equals that). The fast encoder gives exactly the reference's
ordinary-text ids (checked at load, :mod:`tokenmill.tokenize.parity`), so here every piece of every text of a
batch goes through one ``encode_batch`` call, and each token's character span is recovered from the byte
length of its token: byte-level BPE tokens are the piece's UTF-8 bytes in order. A token holding part of a
multi-byte character covers that whole character, as the reference's offsets do.

Used only where that holds by construction: a Hugging Face BPE model with a byte-level pre-tokenizer (no
Metaspace word-start marker, no prefix space), no normalizer or NFC (a text that NFC would change goes the
reference way), and special added tokens that strip nothing around them. Each piece's token bytes must add
up to the piece's bytes, else its text goes the reference way too. Cost: one Rust call per batch, then a few
numpy passes over all its tokens; about 20x less than the reference encoder with offsets.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

Span = tuple[int, int]


class Encoded(NamedTuple):
    """Ids, char starts and char ends of one text, split at its control spans by construction: its control ids
    are exactly its control spans (no :meth:`Tokenizer.controls_match` check is needed)."""

    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


def eligible(tokenizer_json: dict) -> bool:
    """Whether a tokenizer.json's rendered chats can be encoded piecewise with byte-length offsets."""
    model = tokenizer_json.get("model") or {}
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        return False
    normalizer = tokenizer_json.get("normalizer")
    if normalizer is not None and normalizer.get("type") != "NFC":
        return False
    if not _byte_level_only(tokenizer_json.get("pre_tokenizer")):
        return False
    specials = [a for a in tokenizer_json.get("added_tokens") or [] if a.get("special")]
    return not any(a.get("lstrip") or a.get("rstrip") or a.get("single_word") for a in specials)


def _byte_level_only(pre: dict | None) -> bool:
    """A pre-tokenizer that is ByteLevel (no prefix space), or a Sequence of splits ending in such a ByteLevel."""
    if not isinstance(pre, dict):
        return False
    if pre.get("type") == "ByteLevel":
        return not pre.get("add_prefix_space")
    if pre.get("type") == "Sequence":
        parts = pre.get("pretokenizers") or []
        return bool(parts) and all(p.get("type") in ("Split", "ByteLevel", "Digits") for p in parts) and all(
            _byte_level_only(p) for p in parts if p.get("type") == "ByteLevel") and any(
            p.get("type") == "ByteLevel" for p in parts)
    return False


def byte_lengths(vocab: dict[int, bytes]) -> np.ndarray:
    """Bytes of every id's token (0 for ids the fast encoder does not have)."""
    lengths = np.zeros(max(vocab) + 1 if vocab else 0, dtype=np.int64)
    ids = np.fromiter(vocab.keys(), dtype=np.int64, count=len(vocab))
    lengths[ids] = np.fromiter((len(v) for v in vocab.values()), dtype=np.int64, count=len(vocab))
    return lengths


def encode_batch(
    texts: Sequence[str], controls: Sequence[Sequence[Span]], *, encode_flat, lengths: np.ndarray,
    control_id: dict[str, int], nfc: bool,
) -> list[Encoded | None]:
    """(ids, char starts, char ends) of each text split at its ``controls``; None for a text this path cannot
    encode exactly (not NFC-stable where the model normalises, or token bytes not adding up).

    ASCII texts and the others are encoded as two groups: an ASCII text's char offsets are its byte offsets, so
    only the other group pays for mapping bytes to chars (most chats of a batch are ASCII, but nearly every
    batch holds one that is not, which used to send the whole batch's bytes through the mapping)."""
    out: list[Encoded | None] = [None] * len(texts)
    ascii_text = [t.isascii() for t in texts]  # a flag of the string: no scan
    for ascii_group in (True, False):
        group = [i for i, t in enumerate(texts) if ascii_text[i] == ascii_group and (
            ascii_group or not nfc or unicodedata.is_normalized("NFC", t))]
        if group:
            _encode_group(group, texts, controls, out, ascii_group=ascii_group, encode_flat=encode_flat,
                          lengths=lengths, control_id=control_id)
    return out


def _encode_group(group: list[int], texts: Sequence[str], controls: Sequence[Sequence[Span]],
                  out: list[Encoded | None], *, ascii_group: bool, encode_flat, lengths: np.ndarray,
                  control_id: dict[str, int]) -> None:
    """Fill ``out[i]`` for the texts ``group`` names, with one ``encode_flat`` call (left None: bytes not adding up)."""
    plan = _Plan()
    for i in group:
        plan.add(i, texts[i], controls[i], control_id)
    ids, offsets = encode_flat(plan.pieces) if plan.pieces else (np.zeros(0, np.uint32), np.zeros(1, np.int64))
    starts, ends, bad = _char_offsets(plan, ids, offsets, lengths, ascii_text=ascii_group)
    ok = dict.fromkeys(group, True)
    for k in bad:
        ok[plan.owner[k]] = False
    _assemble(plan, (ids, starts, ends), offsets, ok, out)


class _Plan:
    """The pieces of a batch in text order, and where every piece and control token goes in the output."""

    def __init__(self):
        self.pieces: list[str] = []
        self.owner: list[int] = []  # text of each piece
        self.shift: list[int] = []  # text position of each piece minus its position in the joined pieces
        self.before: list[int] = []  # control tokens of the batch placed before each piece
        self.c_ids: list[int] = []
        self.c_starts: list[int] = []  # char span of each control token in its text
        self.c_ends: list[int] = []
        self.c_pieces: list[int] = []  # pieces of the batch placed before each control token
        self.texts: dict[int, tuple[int, int]] = {}  # text -> (pieces before it, control tokens before it)
        self.joined = 0  # characters of the joined pieces so far

    def add(self, i: int, text: str, control: Sequence[Span], control_id: dict[str, int]) -> None:
        pieces, owner, shift, before = self.pieces, self.owner, self.shift, self.before  # the loop runs per piece
        c_ids, c_starts, c_ends, c_pieces = self.c_ids, self.c_starts, self.c_ends, self.c_pieces
        self.texts[i] = (len(pieces), len(c_ids))
        joined, pos, n = self.joined, 0, len(text)
        for a, b in (*control, (n, n)):
            if a > pos:
                pieces.append(text[pos:a])
                owner.append(i)
                shift.append(pos - joined)
                before.append(len(c_ids))
                joined += a - pos
            if b > a:
                c_ids.append(control_id[text[a:b]])
                c_starts.append(a)
                c_ends.append(b)
                c_pieces.append(len(pieces))
            pos = b
        self.joined = joined


def _char_offsets(plan: _Plan, ids: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, *, ascii_text: bool
                  ) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Char start and end of every token in its text, and the pieces whose token bytes do not add up."""
    nbytes = lengths[ids.astype(np.int64)] if len(ids) else np.zeros(0, np.int64)
    ends = np.cumsum(nbytes)  # byte end of every token in the joined pieces
    char_len = np.fromiter(map(len, plan.pieces), dtype=np.int64, count=len(plan.pieces))
    char_end = np.cumsum(char_len)
    if ascii_text:
        char_of = None
        byte_end = char_end
    else:
        raw = np.frombuffer("".join(plan.pieces).encode("utf-8", "surrogatepass"), dtype=np.uint8)
        lead = (raw & 0xC0) != 0x80
        byte_of_char = np.append(np.flatnonzero(lead), len(raw))
        byte_end = byte_of_char[char_end]
        char_of = np.cumsum(lead) - 1
    got = ends[offsets[1:] - 1] if len(ends) else np.zeros(len(plan.pieces), np.int64)
    bad = np.flatnonzero((got != byte_end) | (np.diff(offsets) == 0)).tolist()
    starts = ends - nbytes
    if char_of is not None:  # a token holding part of a character covers that character
        cap = len(char_of) - 1
        last = np.clip(np.maximum(ends - 1, starts), 0, cap)
        starts, ends = char_of[np.minimum(starts, cap)], char_of[last] + 1
    shift = np.repeat(np.asarray(plan.shift, dtype=np.int64), np.diff(offsets))
    return starts + shift, ends + shift, bad


def _assemble(plan: _Plan, encoded: tuple[np.ndarray, ...], offsets: np.ndarray, ok: dict[int, bool],
              out: list[Encoded | None]) -> None:
    """Every piece token and control token at its place in one array per column, then one slice per text."""
    ids, starts, ends = encoded
    total = len(ids) + len(plan.c_ids)
    place = np.arange(len(ids), dtype=np.int64) + np.repeat(np.asarray(plan.before, dtype=np.int64), np.diff(offsets))
    c_place = offsets[np.asarray(plan.c_pieces, dtype=np.int64)] + np.arange(len(plan.c_ids), dtype=np.int64)
    cols = (np.empty(total, np.uint32), np.empty(total, np.int64), np.empty(total, np.int64))
    for col, piece_values, control_values in zip(cols, (ids, starts, ends), (plan.c_ids, plan.c_starts, plan.c_ends)):
        col[place] = piece_values
        col[c_place] = control_values
    first = offsets.tolist()  # token index of each piece's first token: read once per text below
    bounds = [first[p0] + c0 for p0, c0 in plan.texts.values()] + [total]  # texts in the order they were added
    for k, i in enumerate(plan.texts):
        if ok[i]:
            lo, hi = bounds[k], bounds[k + 1]
            out[i] = Encoded(cols[0][lo:hi], cols[1][lo:hi], cols[2][lo:hi])
