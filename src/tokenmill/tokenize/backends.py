"""Reference encoders (HF ``tokenizers``, tiktoken, sentencepiece) and the gigatoken fast encoder.

Every reference encoder offers the same small surface: ``encode`` / ``encode_batch`` with special-token
strings read as ordinary text, ``encode_offsets`` (ids and char offsets; ``control=True`` reads special-token
strings as control tokens), ``decode``, ``token_to_id``, ``specials`` and ``vocab_size``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import orjson

from tokenmill._extras import require
from tokenmill.tokenize import pieces
from tokenmill.tokenize import tiktoken_specs as tk
from tokenmill.tokenize.sources import Source, cache_dir, write_cached

if TYPE_CHECKING:
    import gigatoken

Offsets = tuple[list[int], np.ndarray, np.ndarray]


def reference_for(source: Source):
    """The reference encoder of a source."""
    kinds = {"hf": HFReference, "tiktoken": TiktokenReference, "sentencepiece": SentencePieceReference}
    return kinds[source.kind](source)


# fast encoders built ahead in this process (the fork server: tokenmill/engine/warm.py), by source_key
PREBUILT: dict[str, gigatoken.Tokenizer] = {}


def source_key(source: Source) -> str:
    """What decides a source's fast encoder: its kind, split pattern and bytes (kept on the source)."""
    if source.key is None:
        import hashlib

        h = hashlib.sha256(f"{source.kind}\0{source.pat_str}\0".encode())
        h.update(source.data)
        key = h.hexdigest()
        object.__setattr__(source, "key", key)  # a frozen dataclass: its one cached field
        return key
    return source.key


def fast_for(source: Source, reference=None) -> gigatoken.Tokenizer:
    """The gigatoken encoder of a source: the one built ahead in this process when there is one, else built
    now (from ``reference`` when given, else without loading the reference encoder where possible)."""
    if PREBUILT:
        found = PREBUILT.get(source_key(source))
        if found is not None:
            return found
    if source.kind == "hf":
        return _hf_fast_cached(source)
    if reference is not None:
        return reference.fast()
    return reference_for(source).fast()


FAST_JSON_VERSION = 1  # bump when _fast_json changes, so older cached files are not used


def _hf_fast_cached(source: Source):
    """:func:`_hf_fast` of a ``tokenizer.json`` source, from its fast encoder's JSON cached under
    ``$TOKENMILL_CACHE/encoders/`` by the file's bytes: parsing 150k tokens and writing them out again costs
    about 0.3 s, a third of the encoder's build, which a worker's first unit waits for."""
    import gigatoken

    path = cache_dir() / "encoders" / f"{FAST_JSON_VERSION}-{source_key(source)}.json"
    try:
        return gigatoken.Tokenizer.from_json(path.read_bytes())
    except (OSError, ValueError, RuntimeError):  # none yet, or unreadable: built again below, and replaced
        pass
    data = _fast_json(orjson.loads(source.data))
    write_cached(path, data)
    return gigatoken.Tokenizer.from_json(data)


def token_byte_lengths(source: Source, fast) -> np.ndarray:
    """The byte length of every token of ``fast`` (the encoder of ``source``), cached beside its JSON under
    ``$TOKENMILL_CACHE/encoders/``: reading 150k tokens out of the encoder to measure them costs 0.1 s, before
    each SFT worker's first unit. A cached table whose size is not the encoder's vocabulary size is measured
    again."""
    path = cache_dir() / "encoders" / f"{FAST_JSON_VERSION}-{source_key(source)}.lengths"
    try:
        table = np.frombuffer(bytearray(path.read_bytes()), dtype="<i8")
        if len(table) == fast.vocab_size:
            return table.astype(np.int64, copy=False)
    except (OSError, ValueError):
        pass
    table = pieces.byte_lengths(fast.vocab)
    write_cached(path, table.astype("<i8").tobytes())
    return table


def _fast_json(tokenizer_json: dict) -> bytes:
    """The ``tokenizer.json`` of the fast encoder: the special added tokens removed, so their strings stay text."""
    stripped = dict(tokenizer_json)
    stripped["added_tokens"] = [a for a in tokenizer_json.get("added_tokens") or [] if not a.get("special")]
    return orjson.dumps(stripped)


def _hf_fast(tokenizer_json: dict):
    """A gigatoken encoder with the special added tokens removed, so their strings stay text."""
    import gigatoken

    return gigatoken.Tokenizer.from_json(_fast_json(tokenizer_json))


def byte_to_char(text: str, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Map UTF-8 byte offsets (end exclusive) to char offsets; a token inside a char covers that char."""
    raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    char_of = np.cumsum((raw & 0xC0) != 0x80) - 1
    char_of = np.append(char_of, len(text)).astype(np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    last = np.maximum(ends - 1, starts)
    return char_of[starts], np.where(ends > starts, char_of[last] + 1, char_of[starts])


def _no_first_prefix(pre: dict | None) -> dict | None:
    """A pre-tokenizer config with every Metaspace ``prepend_scheme="first"`` set to ``"never"``."""
    if not isinstance(pre, dict):
        return pre
    if pre.get("type") == "Metaspace" and pre.get("prepend_scheme") == "first":
        return {**pre, "prepend_scheme": "never"}
    if pre.get("type") == "Sequence":
        return {**pre, "pretokenizers": [_no_first_prefix(p) for p in pre.get("pretokenizers") or []]}
    return pre


class HFReference:
    """The ``tokenizers`` reference. Its metadata (vocabulary size, specials, ``token_to_id``) comes from the
    parsed ``tokenizer.json``; the ``tokenizers.Tokenizer`` objects are built on first encode or decode, so a
    process that only reads metadata (a run's main process) never pays for them (a second for 150k tokens)."""

    backend = "tokenizers"

    def __init__(self, source: Source):
        self._data = source.data
        self._ordinary_tok = self._control_tok = self._after_control_tok = None
        self.json = orjson.loads(source.data)
        added = self.json.get("added_tokens") or []
        self._added = {a["content"]: int(a["id"]) for a in added}
        self.specials = {a["content"]: int(a["id"]) for a in added if a.get("special")}
        self._vocab = (self.json.get("model") or {}).get("vocab")
        ids = [int(a["id"]) for a in added] + [self._model_vocab_size() - 1]
        self.vocab_size = max(ids) + 1

    def _build(self):
        import tokenizers

        return tokenizers.Tokenizer.from_str(self._data.decode("utf-8"))

    @property
    def _ordinary(self):
        if self._ordinary_tok is None:
            self._ordinary_tok = self._build()
            self._ordinary_tok.encode_special_tokens = True
        return self._ordinary_tok

    @property
    def _control(self):
        if self._control_tok is None:
            self._control_tok = self._build()
        return self._control_tok

    def _model_vocab_size(self) -> int:
        """``get_vocab_size(with_added_tokens=False)``: the model's own vocabulary (dict or Unigram list)."""
        if isinstance(self._vocab, (dict, list)):
            return len(self._vocab)
        return self._ordinary.get_vocab_size(with_added_tokens=False)

    def encode(self, text: str) -> list[int]:
        return self._ordinary.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._ordinary.encode_batch(list(texts), add_special_tokens=False)]

    def encode_offsets(self, text: str, *, control: bool, at_start: bool = True) -> Offsets:
        """``at_start=False``: ``text`` follows a control token, as a piece of a longer render; a Metaspace
        pre-tokenizer with ``prepend_scheme="first"`` then adds no word-start marker, as in the whole render."""
        tok = self._control if control else (self._ordinary if at_start else self._after_control)
        enc = tok.encode(text, add_special_tokens=False)
        spans = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
        return enc.ids, spans[:, 0], spans[:, 1]

    @property
    def _after_control(self):
        if self._after_control_tok is None:
            import tokenizers

            changed = dict(self.json)
            changed["pre_tokenizer"] = _no_first_prefix(self.json.get("pre_tokenizer"))
            if changed["pre_tokenizer"] == self.json.get("pre_tokenizer"):
                self._after_control_tok = self._ordinary
            else:
                self._after_control_tok = tokenizers.Tokenizer.from_str(orjson.dumps(changed).decode())
                self._after_control_tok.encode_special_tokens = True
        return self._after_control_tok

    def encode_offsets_batch(self, texts: Sequence[str], *, control: bool) -> list[Offsets]:
        """:meth:`encode_offsets` of many texts in one (Rust-parallel where allowed) call."""
        if not texts:
            return []
        encs = (self._control if control else self._ordinary).encode_batch(list(texts), add_special_tokens=False)
        out = []
        for enc in encs:
            spans = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
            out.append((enc.ids, spans[:, 0], spans[:, 1]))
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return self._control.decode([int(i) for i in ids], skip_special_tokens=False)

    def token_to_id(self, token: str) -> int | None:
        """Added tokens first, then the model's vocabulary (as ``tokenizers`` looks them up)."""
        if token in self._added:
            return self._added[token]
        if isinstance(self._vocab, dict):
            found = self._vocab.get(token)
            return None if found is None else int(found)
        return self._ordinary.token_to_id(token)

    def fast(self):
        return _hf_fast(self.json)

    def canonical(self) -> dict:
        model = dict(self.json.get("model") or {})
        model["merges"] = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
        model.pop("dropout", None)
        added = sorted((int(a["id"]), a["content"], bool(a.get("special"))) for a in self.json.get("added_tokens") or [])
        return {"model": model, "normalizer": self.json.get("normalizer"),
                "pre_tokenizer": self.json.get("pre_tokenizer"), "added_tokens": added}


class TiktokenReference:
    backend = "tiktoken"

    def __init__(self, source: Source):
        import tiktoken

        self._source = source
        ranks = tk.parse_ranks(source.data)
        self.enc = tiktoken.Encoding(source.name, pat_str=source.pat_str, mergeable_ranks=ranks,
                                     special_tokens=dict(source.specials))
        self.specials = dict(source.specials)
        self.vocab_size = self.enc.max_token_value + 1
        self._lengths: np.ndarray | None = None

    def encode(self, text: str) -> list[int]:
        return self.enc.encode_ordinary(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.enc.encode_ordinary_batch(list(texts))

    def encode_offsets(self, text: str, *, control: bool, at_start: bool = True) -> Offsets:
        ids = self.enc.encode(text, allowed_special="all") if control else self.enc.encode_ordinary(text)
        ends = np.cumsum(self._token_lengths()[np.asarray(ids, dtype=np.int64)]) if ids else np.zeros(0, np.int64)
        starts = ends - self._token_lengths()[np.asarray(ids, dtype=np.int64)]
        return ids, *byte_to_char(text, starts, ends)

    def encode_offsets_batch(self, texts: Sequence[str], *, control: bool) -> list[Offsets]:
        return [self.encode_offsets(t, control=control) for t in texts]

    def _token_lengths(self) -> np.ndarray:
        if self._lengths is None:
            lengths = np.zeros(self.vocab_size, dtype=np.int64)
            for token, rank in tk.parse_ranks(self._source.data).items():
                lengths[rank] = len(token)
            for token, rank in self.specials.items():
                lengths[rank] = len(token.encode("utf-8"))
            self._lengths = lengths
        return self._lengths

    def decode(self, ids: Sequence[int]) -> str:
        return self.enc.decode([int(i) for i in ids])

    def token_to_id(self, token: str) -> int | None:
        if token in self.specials:
            return self.specials[token]
        try:
            return self.enc.encode_single_token(token.encode("utf-8"))
        except KeyError:
            return None

    def fast(self):
        import gigatoken

        scheme = tk.GIGATOKEN_SCHEMES.get(self._source.pat_str)
        if scheme is None:
            raise ValueError("gigatoken implements no pretokenizer for this split pattern")
        return gigatoken.Tokenizer.from_tiktoken(tk.ranks_file(self._source.data), pretokenizer=scheme,
                                                 special_tokens={})

    def canonical(self) -> dict:
        import hashlib

        return {"ranks": hashlib.sha256(self._source.data).hexdigest(), "pat_str": self._source.pat_str,
                "specials": sorted(self.specials.items())}


class SentencePieceReference:
    backend = "sentencepiece"

    def __init__(self, source: Source):
        spm = require("sentencepiece", "sentencepiece", "load a SentencePiece .model")
        self._source = source
        self.sp = spm.SentencePieceProcessor(model_proto=source.data)
        n = self.sp.get_piece_size()
        self.specials = {self.sp.id_to_piece(i): i for i in range(n) if self.sp.is_control(i) or self.sp.is_unknown(i)}
        self.vocab_size = n
        self._sp_no_prefix = None

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.sp.encode(list(texts))

    def encode_offsets(self, text: str, *, control: bool, at_start: bool = True) -> Offsets:
        # SentencePiece never reads control tokens from text: callers split control tokens out first.
        # A piece after a control token gets no word-start marker, as HF's Metaspace prepend_scheme="first".
        sp = self.sp if at_start else self._without_prefix()
        pieces = sp.encode(text, return_type="proto").pieces
        starts = np.asarray([p.begin for p in pieces], dtype=np.int64)
        ends = np.asarray([p.end for p in pieces], dtype=np.int64)
        return [p.id for p in pieces], *byte_to_char(text, starts, ends)

    def encode_offsets_batch(self, texts: Sequence[str], *, control: bool) -> list[Offsets]:
        return [self.encode_offsets(t, control=control) for t in texts]

    def _without_prefix(self):
        if self._sp_no_prefix is None:
            spm = require("sentencepiece", "sentencepiece", "load a SentencePiece .model")
            model_pb2 = require("sentencepiece.sentencepiece_model_pb2", "sentencepiece", "edit a .model")
            proto = model_pb2.ModelProto()
            proto.ParseFromString(self._source.data)
            proto.normalizer_spec.add_dummy_prefix = False
            self._sp_no_prefix = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
        return self._sp_no_prefix

    def decode(self, ids: Sequence[int]) -> str:
        return self.sp.decode([int(i) for i in ids])

    def token_to_id(self, token: str) -> int | None:
        i = self.sp.piece_to_id(token)
        return i if self.sp.id_to_piece(i) == token else None

    def fast(self):
        import gigatoken
        from gigatoken._load.sentencepiece import sentencepiece_to_tokenizer_json

        data = json.loads(sentencepiece_to_tokenizer_json(self._source.data))
        data["added_tokens"] = [a for a in data.get("added_tokens") or [] if not a.get("special")]
        return gigatoken.Tokenizer.from_json(orjson.dumps(data))

    def canonical(self) -> dict:
        import hashlib

        return {"model": hashlib.sha256(self._source.data).hexdigest(), "specials": sorted(self.specials.items())}
