"""The one tokenizer object tokenmill uses inside: :class:`Tokenizer`, built by :func:`load_tokenizer`."""

from __future__ import annotations

import copy
import hashlib
import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import numpy as np
import orjson

from tokenmill.errors import TokenizerError
from tokenmill.tokenize import backends, pieces, sources
from tokenmill.tokenize.backends import fast_for, reference_for, source_key
from tokenmill.tokenize.parity import agreement_cached, choose_fast
from tokenmill.tokenize.sources import TokenizerSpec

if TYPE_CHECKING:
    import gigatoken
    import pyarrow as pa

Span = tuple[int, int]


def load_tokenizer(spec: TokenizerSpec, *, fast: bool = True, parity_sample: list[str] | None = None) -> Tokenizer:
    """Load a tokenizer from a name, directory, file, tokenizer object or ``"default"`` (see README)."""
    source = sources.resolve(spec)
    known = _checked_from_meta(source, parity_sample) if fast else None
    if known is not None:
        return known
    try:
        reference = reference_for(source)
        fingerprint = tokenizer_fingerprint(source, reference)
        use_fast, fast_encoder = (choose_fast(reference, name=source.name, parity_sample=parity_sample,
                                              fingerprint=fingerprint, build=lambda: fast_for(source, reference))
                                  if fast else (False, None))
        if not use_fast:
            reference.encode("")  # the reference is the encoder: build it here, so a broken file fails here
    except TokenizerError:
        raise
    except Exception as exc:
        raise TokenizerError(f"tokenizer {source.name!r} ({source.kind}) could not be built: "
                             f"{type(exc).__name__}: {exc}") from exc
    tok = Tokenizer(source, reference, fast_encoder, fast=use_fast, fingerprint=fingerprint)
    _remember_meta(tok, reference)
    return tok


def load_if_checked(spec: TokenizerSpec, *, parity_sample: list[str] | None = None) -> Tokenizer | None:
    """The tokenizer of ``spec`` when loading it builds no encoder, else None (load it with
    :func:`load_tokenizer`, in a child process: tokenize/isolated.py).

    That is a ``tokenizer.json`` tokenizer (its metadata comes from the parsed file) whose parity verdict
    for these texts is cached as "the fast path agrees": nothing to check, so nothing to build here. The
    result holds no encoders (the workers build the fast one, or find it prebuilt).
    """

    try:
        source = sources.resolve(spec)
        if source.kind != "hf":
            return None
        known = _checked_from_meta(source, parity_sample)
        if known is not None:
            return known
        reference = reference_for(source)
        fingerprint = tokenizer_fingerprint(source, reference)
    except Exception:  # noqa: BLE001 -- the full load reports what is wrong, with its own message
        return None
    if not agreement_cached(fingerprint, parity_sample):
        return None
    tok = Tokenizer(source, reference, None, fast=True, fingerprint=fingerprint)
    _remember_meta(tok, reference)
    tok.release()
    return tok


META_VERSION = 1  # bump when the metadata Tokenizer derives from its files change, so older entries are not used
META_FIELDS = ("special_tokens", "vocab_size", "bos_token", "eos_token", "bos_id", "eos_id", "pad_id", "add_bos",
               "fingerprint")


def _meta_path(source: sources.Source):
    """Where a ``tokenizer.json`` tokenizer's metadata is cached: by its bytes and its config (which name the
    special tokens), under ``$TOKENMILL_CACHE/tokenizer-meta/``; None for other kinds or an odd config."""
    if source.kind != "hf":
        return None
    try:
        config = orjson.dumps(source.config, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return None
    key = hashlib.sha256(f"{source_key(source)}\0".encode() + config).hexdigest()
    return sources.cache_dir() / "tokenizer-meta" / f"{META_VERSION}-{key}.json"


def _remember_meta(tok: Tokenizer, reference) -> None:
    """Cache what ``tok`` read from its parsed files, so a later load with a cached parity verdict need not parse
    them (0.3 s for a 150k-token vocabulary, in the main process of every run, before any unit starts)."""
    path = _meta_path(tok._source)
    if path is None or _read_meta(path) is not None:
        return
    meta = {field: getattr(tok, field) for field in META_FIELDS}
    meta["pieces"] = list(_piece_path(reference, tok._source))
    sources.write_cached(path, orjson.dumps(meta))


def _checked_from_meta(source: sources.Source, parity_sample: list[str] | None) -> Tokenizer | None:
    """The tokenizer of ``source`` from its cached metadata, when that is cached and so is the verdict "the fast
    path agrees" for these texts; no file is parsed and no encoder built (each is built where it is used)."""

    path = _meta_path(source)
    meta = _read_meta(path) if path is not None else None
    if meta is None or not agreement_cached(meta["fingerprint"], parity_sample):
        return None
    return Tokenizer.from_meta(source, meta)


def _read_meta(path) -> dict | None:
    """A cached metadata entry, or None when there is none or it is damaged (then it is written again)."""
    try:
        meta = orjson.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    ok = (isinstance(meta, dict) and all(f in meta for f in META_FIELDS) and isinstance(meta["special_tokens"], dict)
          and isinstance(meta["fingerprint"], str) and isinstance(meta.get("pieces"), list) and len(meta["pieces"]) == 2)
    return meta if ok else None


def _piece_path(reference, source) -> tuple[bool, bool]:
    """(whether rendered chats can go through the fast piecewise path, whether the model normalises to NFC), from
    the parsed ``tokenizer.json``."""
    if source.kind != "hf":
        return False, False

    normalizer = reference.json.get("normalizer") or {}
    return pieces.eligible(reference.json), normalizer.get("type") == "NFC"


FINGERPRINT_VERSION = 1  # bump when canonical() changes, so older cached fingerprints are not used


def tokenizer_fingerprint(source: sources.Source, reference) -> str:
    """sha256 of what decides the ids: the source kind and the reference's canonical model.

    A ``tokenizer.json``'s is cached under ``$TOKENMILL_CACHE/fingerprints/`` by the file's bytes (its canonical
    form is a function of them alone), as building and hashing it costs about 0.1 s for a 150k-token
    vocabulary, a tenth of a small run's start-up; hashing the bytes costs a hundredth of that. The other
    kinds' canonical forms are digests already."""
    if source.kind != "hf":
        return _digest({"kind": source.kind, **reference.canonical()})
    path = sources.cache_dir() / "fingerprints" / f"{FINGERPRINT_VERSION}-{source_key(source)}"
    try:
        cached = path.read_text()
        if len(cached) == 64:
            return cached
    except OSError:
        pass
    fingerprint = _digest({"kind": source.kind, **reference.canonical()})
    sources.write_cached(path, fingerprint.encode())
    return fingerprint


def _digest(canonical: dict) -> str:
    return hashlib.sha256(orjson.dumps(canonical, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _token_name(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


# End-of-text tokens of widely used vocabularies, for a bare tokenizer.json with no tokenizer_config.json.
EOS_NAMES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<｜end▁of▁sentence｜>")


def _post_processor_bos(tokenizer_json: dict) -> str | None:
    """The special token a tokenizer.json's post-processor puts before a single sequence, if any."""
    single = (tokenizer_json.get("post_processor") or {}).get("single") or []
    first = single[0] if single else {}
    return first.get("SpecialToken", {}).get("id") if isinstance(first, dict) else None


class Tokenizer:
    """A loaded tokenizer: ids without added specials, metadata for shard headers, and a fingerprint."""

    def __init__(self, source: sources.Source, reference, fast_encoder=None, *, fast: bool | None = None,
                 fingerprint: str | None = None):
        """``fast``: use the gigatoken path (default: when ``fast_encoder`` is given; it is built on first
        use when not given). ``fingerprint``: already computed by the caller."""
        self._source, self._ref = source, reference
        self._fast: gigatoken.Tokenizer | None = fast_encoder
        self.name = source.name
        use_fast = fast_encoder is not None if fast is None else fast
        self.backend = "gigatoken" if use_fast else reference.backend
        self.chat_template = source.chat_template
        self.special_tokens = self._collect_specials(reference, source.config)
        self.vocab_size = max([reference.vocab_size, *[i + 1 for i in self.special_tokens.values()]])
        self.bos_token, self.eos_token, pad = self._named_tokens(reference, source)
        self.bos_id, self.eos_id = self._id_or_none(self.bos_token), self._id_or_none(self.eos_token)
        self.pad_id = self._id_or_none(pad)
        self.add_bos = self._add_bos(reference, source)
        self.fingerprint = fingerprint or tokenizer_fingerprint(source, reference)
        self._special_re = self._compile_specials()
        # read here from the parsed tokenizer.json, so a worker never parses it again (0.3 s for 150k tokens)
        self._pieces = _piece_path(reference, source) if self.backend == "gigatoken" else (False, False)

    @classmethod
    def from_meta(cls, source: sources.Source, meta: dict[str, Any]) -> Tokenizer:
        """The fast-path tokenizer of ``source`` from metadata an earlier load derived from the same files
        (:func:`_remember_meta`); no reference, no fast encoder yet (each is built on first use)."""
        tok = cls.__new__(cls)
        tok._source, tok._ref, tok._fast = source, None, None
        tok.name, tok.backend, tok.chat_template = source.name, "gigatoken", source.chat_template
        for field in META_FIELDS:
            setattr(tok, field, meta[field])
        tok.special_tokens = {str(k): int(v) for k, v in meta["special_tokens"].items()}
        tok._special_re = tok._compile_specials()
        tok._pieces = (bool(meta["pieces"][0]), bool(meta["pieces"][1]))
        return tok

    # -- construction helpers -------------------------------------------------------------------------------

    @staticmethod
    def _collect_specials(reference, config: dict) -> dict[str, int]:
        specials = dict(reference.specials)
        for token in config.get("additional_special_tokens") or []:
            name = _token_name(token)
            if name and name not in specials and reference.token_to_id(name) is not None:
                specials[name] = reference.token_to_id(name)
        return specials

    @staticmethod
    def _named_tokens(reference, source) -> tuple[str | None, str | None, str | None]:
        config = source.config
        bos, eos, pad = (_token_name(config.get(k)) for k in ("bos_token", "eos_token", "pad_token"))
        if source.kind == "sentencepiece" and not config:
            sp = reference.sp
            bos = sp.id_to_piece(sp.bos_id()) if sp.bos_id() >= 0 else None
            eos = sp.id_to_piece(sp.eos_id()) if sp.eos_id() >= 0 else None
        if bos is None and source.kind == "hf":
            bos = _post_processor_bos(reference.json)
        if eos is None:
            eos = next((t for t in EOS_NAMES if t in reference.specials), None)
        return bos, eos, pad

    def _id_or_none(self, token: str | None) -> int | None:
        if token is None:
            return None
        return self.special_tokens.get(token, self.reference.token_to_id(token))

    def _add_bos(self, reference, source) -> bool:
        flag = source.config.get("add_bos_token")
        if isinstance(flag, bool):
            return flag and self.bos_id is not None
        if source.kind == "hf":
            single = ((reference.json.get("post_processor") or {}).get("single") or [{}])
            return "SpecialToken" in single[0] and self.bos_id is not None
        return source.kind == "sentencepiece" and self.bos_id is not None

    def _compile_specials(self) -> re.Pattern | None:
        ordered = sorted((t for t in self.special_tokens if t), key=len, reverse=True)  # "" is no token string
        return re.compile("|".join(re.escape(s) for s in ordered)) if ordered else None

    # -- pickling: ship the recipe, rebuild the encoders in the receiving process -----------------------------

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_ref"], state["_fast"] = None, None
        state.pop("_piece_table", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    @property
    def reference(self):
        if self._ref is None:
            self._ref = reference_for(self._source)
        return self._ref

    @property
    def _fast_encoder(self) -> gigatoken.Tokenizer:
        """The gigatoken encoder (read on the ``gigatoken`` backend only), built on first use."""
        if self._fast is None:
            # a worker that only encodes documents never keeps the (larger) reference encoder alive
            self._fast = fast_for(self._source, self._ref)
        return self._fast

    def release(self) -> None:
        """Drop the loaded encoders (hundreds of MB for large vocabularies); they are rebuilt on next use."""
        self._ref = self._fast = None
        self.__dict__.pop("_piece_table", None)

    # -- encoding -------------------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; no BOS/EOS added; special-token strings are ordinary text."""
        if self.backend == "gigatoken":
            return self._fast_encoder.encode(text).tolist()
        return list(self.reference.encode(text))

    def encode_batch(self, texts: Sequence[str] | Any) -> tuple[np.ndarray, np.ndarray]:
        """Flat uint32 ids and int64 offsets (``len(texts) + 1``) of many texts; same semantics as encode.

        ``texts`` may be a pyarrow string array without nulls: the fast path then reads its buffers
        directly (no Python string per document), about 40% less encode time on web documents.
        """
        arrow = _is_arrow_strings(texts)
        if self.backend == "gigatoken":
            if _in_worker():  # gigatoken's batch call would encode on this thread too: no gain, and it needs awkward
                return self._encode_each(_each_text(texts, arrow))
            small = _small_batch(texts, arrow)
            if small is not None:
                return self._encode_each(small)
            batch = _awkward_strings(texts) if arrow else list(texts)
            return _flat_from_awkward(self._fast_encoder.encode_batch(batch))
        lists = self.reference.encode_batch(texts.to_pylist() if _is_arrow_strings(texts) else texts)
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in lists], out=offsets[1:])
        ids = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.uint32, count=int(offsets[-1]))
        return ids, offsets

    def _encode_each(self, texts: Sequence[str | bytes]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode_batch` one text (or its UTF-8 bytes) per call: gigatoken's batch call imports ``awkward``
        (0.2-0.4 s, most of a tiny run's encoding) and hands its work to threads, which a pool worker does not
        use (gigatoken then encodes on the calling thread, at the same rate as this); the ids are the same."""
        encode = self._fast_encoder.backend.encode  # the Rust encoder itself: one Python call per text, not three
        parts = [encode(t) for t in texts]
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        ids = np.concatenate(parts).astype(np.uint32, copy=False) if parts else np.zeros(0, dtype=np.uint32)
        return ids, offsets

    def encode_rendered(self, text: str, *, literal_spans: Sequence[Span] = ()) -> tuple[np.ndarray, ...]:
        """Ids, char starts and char ends of a rendered chat; special-token strings are control tokens
        except inside ``literal_spans`` (message content), where they are ordinary text.

        Control tokens are matched in the template's text only (between the literal spans), so a content
        can neither make nor unmake one of the template's control tokens at its edges."""
        control, inside = self.control_spans(text, literal_spans)
        if not inside and self._source.kind != "sentencepiece":
            whole = _arrays(*self.reference.encode_offsets(text, control=True))
            if self.controls_match(whole, text, control):
                return whole
        return self.encode_pieces(text, control)

    def encode_rendered_batch(
        self, texts: Sequence[str], literal_spans_list: Sequence[Sequence[Span]], *,
        layouts: Sequence[tuple[list[Span], int]] | None = None, check: bool = True,
    ) -> list[tuple[np.ndarray, ...]]:
        """:meth:`encode_rendered` of many texts: those with no control-token string inside their literal spans
        go through one batched encoder call, the rest through the per-text path.

        ``layouts``: each text's :meth:`control_spans`, when the caller has them. ``check=False`` leaves the
        :meth:`controls_match` check (and the piecewise re-encoding when it fails) to the caller; results of the
        fast piecewise path (:class:`tokenmill.tokenize.pieces.Encoded`) match by construction."""
        if layouts is None:
            layouts = [self.control_spans(text, literal) for text, literal in zip(texts, literal_spans_list)]
        out: list[tuple[np.ndarray, ...] | None] = self._encode_pieces_fast(texts, [c for c, _ in layouts])
        whole_at: list[tuple[int, list[Span]]] = []
        for i, text in enumerate(texts):
            control, inside = layouts[i]
            if out[i] is not None:
                continue
            if not inside and self._source.kind != "sentencepiece":
                whole_at.append((i, control))
            else:
                out[i] = self.encode_pieces(text, control)
        if not whole_at:  # every text went the fast way: the reference (a parse of its tokenizer.json) is not needed
            return _filled(out)
        encoded = self.reference.encode_offsets_batch([texts[i] for i, _ in whole_at], control=True)
        for (i, control), (ids, starts, ends) in zip(whole_at, encoded):
            whole = _arrays(ids, starts, ends)
            out[i] = whole if not check or self.controls_match(whole, texts[i], control) else self.encode_pieces(
                texts[i], control)
        return _filled(out)

    def _encode_pieces_fast(self, texts: Sequence[str], controls: Sequence[list[Span]]) -> list:
        """:meth:`encode_pieces` of many texts through the fast encoder (tokenize/pieces.py); None for every text
        it cannot encode exactly (or all of them, when this tokenizer has no such path)."""

        table = self._piece_lengths()
        if table is None:
            return [None] * len(texts)
        return pieces.encode_batch(texts, controls, encode_flat=self.encode_batch, lengths=table,
                                   control_id=self.special_tokens, nfc=self._pieces[1])

    def _piece_lengths(self) -> np.ndarray | None:
        """Token byte lengths of the fast encoder when rendered chats can go through it (read once per process,
        from the cache beside the encoder's JSON)."""
        if "_piece_table" not in self.__dict__:
            ok = self.backend == "gigatoken" and self._pieces[0]
            self.__dict__["_piece_table"] = backends.token_byte_lengths(self._source, self._fast_encoder) if ok else None
        return self.__dict__["_piece_table"]

    def control_spans(self, text: str, literal_spans: Sequence[Span] = ()) -> tuple[list[Span], int]:
        """(spans of the special-token strings in ``text`` outside ``literal_spans``, how many lie inside them).

        Matching is done in each stretch between literal spans on its own: a match never crosses a span edge.
        The text is searched once as a whole; where no match crosses a stretch's edge, those are the matches of
        the stretches (the pattern is literal strings), read off by position. Else each stretch is searched.
        """
        if self._special_re is None:
            return [], 0
        found = [m.span() for m in self._special_re.finditer(text)]
        if not found:
            return [], 0
        stretches = _stretches(len(text), literal_spans)
        control, inside, k = [], 0, 0
        for a, b in found:
            while stretches[k][1] <= a:  # the stretches tile the text: one holds a
                k += 1
            _, end, literal = stretches[k]
            if b > end:  # a match across an edge: the stretches' own matches differ
                return self._control_spans_by_stretch(self._special_re, text, stretches)
            if literal:
                inside += 1
            else:
                control.append((a, b))
        return control, inside

    @staticmethod
    def _control_spans_by_stretch(pattern: re.Pattern, text: str, stretches: list[tuple[int, int, bool]]
                                  ) -> tuple[list[Span], int]:
        find = pattern.finditer
        control, inside = [], 0
        for start, end, literal in stretches:
            if literal:
                inside += sum(1 for _ in find(text, start, end))
            else:
                control += [m.span() for m in find(text, start, end)]
        return control, inside

    def controls_match(self, encoded: tuple[np.ndarray, ...], text: str, control: Sequence[Span]) -> bool:
        """Whether the control-token ids of ``encoded`` are exactly one per span of ``control``, at that span,
        with that span's id (no control id anywhere else)."""
        ids, starts, ends = encoded
        if not self.special_tokens:
            return not control
        table = self._special_table()
        ids = np.asarray(ids, dtype=np.int64)
        at = np.flatnonzero(table[np.minimum(ids, len(table) - 1)] & (ids < len(table)))
        if len(at) != len(control):
            return False
        if not len(at):
            return True
        want = np.array(control, dtype=np.int64)
        want_ids = np.fromiter((self.special_tokens[text[a:b]] for a, b in control), dtype=np.int64, count=len(control))
        return bool(np.array_equal(starts[at], want[:, 0]) and np.array_equal(ends[at], want[:, 1])
                    and np.array_equal(ids[at], want_ids))

    def _special_table(self) -> np.ndarray:
        """A boolean per id: whether it is a special token's id (built once)."""
        table = self.__dict__.get("_special_id_table")
        if table is None:
            table = np.zeros(max(self.special_tokens.values()) + 1, dtype=bool)
            table[list(self.special_tokens.values())] = True
            self.__dict__["_special_id_table"] = table
        return table

    def encode_pieces(self, text: str, control: Sequence[Span]) -> tuple[np.ndarray, ...]:
        """Ids and char offsets of ``text`` with exactly the ``control`` spans as control tokens: the text between
        them is encoded piece by piece as ordinary text."""
        parts, pos = [], 0
        for a, b in [*control, (len(text), len(text))]:
            if a > pos:
                ids, starts, ends = self.reference.encode_offsets(text[pos:a], control=False, at_start=pos == 0)
                parts.append((np.asarray(ids, np.int64), np.asarray(starts) + pos, np.asarray(ends) + pos))
            if b > a:
                parts.append((np.array([self.special_tokens[text[a:b]]]), np.array([a]), np.array([b])))
            pos = b
        if not parts:
            return _arrays([], [], [])
        return _arrays(*(np.concatenate(col) for col in zip(*parts)))

    @property
    def control_pattern(self) -> re.Pattern | None:
        """The regex of every special-token string (longest first), or None without special tokens."""
        return self._special_re

    def count_literal_specials(self, text: str) -> int:
        """How many special-token strings occur in ``text``."""
        return sum(1 for _ in self._special_re.finditer(text)) if self._special_re else 0

    def decode(self, ids: Sequence[int]) -> str:
        return self.reference.decode(np.asarray(ids).tolist())

    def token_to_id(self, token: str) -> int | None:
        if token in self.special_tokens:
            return self.special_tokens[token]
        return self.reference.token_to_id(token)

    def with_eos(self, token: str) -> Tokenizer:
        """This tokenizer with ``token`` as its end-of-sequence token; :class:`TokenizerError` when ``token`` is
        not one token of the vocabulary."""
        eos_id = self.token_to_id(token)
        if eos_id is None:
            named = ", ".join(repr(t) for t in sorted(self.special_tokens)[:12])
            raise TokenizerError(f"eos {token!r} is not a token of tokenizer {self.name!r}; give one of its tokens "
                                 f"(its special tokens: {named or 'none'})")
        other = copy.copy(self)
        other.eos_token, other.eos_id = token, int(eos_id)
        return other

    def info(self, *, chat_template: str | None = None) -> dict[str, Any]:
        """Header fields for token shards."""
        template = chat_template if chat_template is not None else self.chat_template
        return {
            "name": self.name, "fingerprint": self.fingerprint, "vocab_size": self.vocab_size,
            "bos_id": self.bos_id, "eos_id": self.eos_id, "pad_id": self.pad_id, "add_bos": self.add_bos,
            "bos_token": self.bos_token, "eos_token": self.eos_token,
            "backend": self.backend, "path": self._source.path, "origin": self._source.origin,
            "chat_template_hash": hashlib.sha256(template.encode("utf-8")).hexdigest() if template else "",
        }

    def __repr__(self) -> str:
        return (f"Tokenizer(name={self.name!r}, backend={self.backend!r}, vocab_size={self.vocab_size}, "
                f"fingerprint={self.fingerprint[:12]!r})")


_T = TypeVar("_T")


def _filled(out: list[_T | None]) -> list[_T]:
    """``out``, every entry of which the caller has set (a None left is a bug, said here, not downstream)."""
    done = [x for x in out if x is not None]
    if len(done) != len(out):
        raise RuntimeError(f"{len(out) - len(done)} of {len(out)} rendered texts were left unencoded")
    return done


def _arrays(ids, starts, ends) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.asarray(ids, dtype=np.uint32), np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))


def _is_arrow_strings(texts: Any) -> TypeGuard[pa.Array]:
    import pyarrow as pa

    return isinstance(texts, pa.Array) and (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type))


SMALL_BATCH_TEXTS = 256  # a batch of at most this many texts and SMALL_BATCH_CHARS is encoded text by text
SMALL_BATCH_CHARS = 1 << 20


def _small_batch(texts: Any, arrow: bool) -> list[str] | None:
    """The texts of a batch small enough to encode one by one (``Tokenizer._encode_each``), else None."""
    if len(texts) > SMALL_BATCH_TEXTS:
        return None
    if arrow:
        if texts.null_count or sum(b.size for b in texts.buffers() if b is not None) > 2 * SMALL_BATCH_CHARS:
            return None  # nulls: the batch path names the problem
        texts = texts.to_pylist()
    else:
        texts = list(texts)
    return texts if sum(map(len, texts)) <= SMALL_BATCH_CHARS else None


def _stretches(n: int, literal_spans: Sequence[Span]) -> list[tuple[int, int, bool]]:
    """(start, end, literal) of the stretches of a text of ``n`` chars that :meth:`Tokenizer.control_spans` searches
    each on its own: the template's text between literal spans, and the literal spans (overlaps merged, the later
    span from where the earlier ended). Empty stretches are left out; the rest tile ``[0, n)``."""
    out, pos = [], 0
    for a, b in sorted(literal_spans):
        if a > pos:
            out.append((pos, min(a, n), False))
        lo = max(a, pos)
        if b > lo:
            out.append((lo, min(b, n), True))
        pos = max(pos, b)
    if pos < n:
        out.append((pos, n, False))
    return [s for s in out if s[1] > s[0]]


def _in_worker() -> bool:
    """Whether this is a worker process (gigatoken's batch call then runs on the calling thread, not on its pool)."""
    import multiprocessing

    return multiprocessing.parent_process() is not None


def _each_text(texts: Any, arrow: bool) -> Sequence[str | bytes]:
    """The texts of a batch, one by one: from an Arrow array, each text's UTF-8 bytes sliced out of its data buffer
    (no Python string per text)."""
    if not arrow:
        return texts if isinstance(texts, (list, tuple)) else list(texts)
    if texts.null_count:
        raise TokenizerError("encode_batch got an Arrow array with nulls; drop or reject them first")
    import pyarrow as pa

    _, offsets_buf, data_buf = texts.buffers()
    width = "<i8" if pa.types.is_large_string(texts.type) else "<i4"
    bounds = np.frombuffer(offsets_buf, dtype=width)[texts.offset:texts.offset + len(texts) + 1].tolist()
    data = memoryview(data_buf) if data_buf is not None else memoryview(b"")
    return [bytes(data[a:b]) for a, b in zip(bounds, bounds[1:])]


def _awkward_strings(texts):
    """An awkward string array over the Arrow array's own offset and data buffers (zero-copy for large_string)."""
    import awkward as ak
    import pyarrow as pa

    if texts.null_count:
        raise TokenizerError("encode_batch got an Arrow array with nulls; drop or reject them first")
    if pa.types.is_string(texts.type):
        texts = texts.cast(pa.large_string())
    _, offsets_buf, data_buf = texts.buffers()
    offsets = np.frombuffer(offsets_buf, dtype="<i8")[texts.offset:texts.offset + len(texts) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    # awkward's ArrayLike protocol does not accept numpy's own ndarray stub (numpy >= 2.3 typing)
    chars = ak.contents.NumpyArray(data, parameters={"__array__": "char"})  # pyright: ignore[reportArgumentType]
    return ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets), chars, parameters={"__array__": "string"}))


def _flat_from_awkward(array) -> tuple[np.ndarray, np.ndarray]:
    """Zero-copy views of an awkward list array's content and offsets (rebased to start at 0)."""
    layout = array.layout
    if hasattr(layout, "offsets") and hasattr(layout, "content"):
        offsets = np.asarray(layout.offsets.data).astype(np.int64, copy=False)
        content = np.asarray(layout.content.data)
        ids = content[offsets[0]:offsets[-1]].astype(np.uint32, copy=False)
        return ids, offsets - offsets[0] if offsets[0] else offsets
    import awkward as ak

    counts = np.asarray(ak.num(array), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return np.asarray(ak.to_numpy(ak.flatten(array)), dtype=np.uint32), offsets
