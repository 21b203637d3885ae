"""An n-gram model's files and its queries: the ARPA text KenLM reads, tokenmill's binary form, and scoring.

``model.tmlm``, the binary form: ``MAGIC``, a little-endian uint64 header length, a JSON header (order,
vocabulary size, normalisation version, language, and each array's offset, dtype and length), then the arrays,
each at an 8-byte aligned offset: the vocabulary (UTF-8 bytes and int64 offsets), and per order the packed
keys (int64, sorted), log10 probabilities (float32, as KenLM holds them) and, below the highest order, log10
backoffs. Loading maps the file; a lookup is ``searchsorted`` on the packed keys.

Scoring follows the backoff model the ARPA file states, as KenLM does: the probability of a word is that of
the longest n-gram ending in it the model holds, times the backoff of every longer context it holds.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import ConfigError
from tokenmill.lm.counts import BOS, EOS, UNK
from tokenmill.lm.estimate import Model

MAGIC = b"TOKENMILL-NGRAM\n"
BINARY, ARPA = "model.tmlm", "model.arpa"


def _text(values: np.ndarray) -> pa.Array:
    """log10 values as the ARPA text holds them (already rounded to 6 decimals)."""
    return pa.array(values.astype(np.float64)).cast(pa.large_string())


def write_arpa(model: Model, path: Path) -> None:
    """The ARPA text: the header's counts, then each order's n-grams (``logp<TAB>words[<TAB>backoff]``)."""
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\\data\\\n")
        for n, k in enumerate(model.keys, start=1):
            fh.write(f"ngram {n}={len(k)}\n")
        words = model.vocab
        for n in range(model.order):
            fh.write(f"\n\\{n + 1}-grams:\n")
            if n:
                words = pc.binary_join_element_wise(words.take(pa.array(model.keys[n] // model.size)),
                                                    model.vocab.take(pa.array(model.keys[n] % model.size)),
                                                    pa.scalar(" ", pa.large_string()))
            parts = [_text(model.logp[n]), words]
            if n < model.order - 1:
                parts.append(_text(model.backoff[n]))
            lines = pc.binary_join_element_wise(*parts, pa.scalar("\t", pa.large_string()))
            if len(lines):
                fh.write("\n".join(lines.to_pylist()))
                fh.write("\n")
        fh.write("\n\\end\\\n")


def _arrays(model: Model) -> list[tuple[str, np.ndarray]]:
    encoded = [w.encode("utf-8") for w in model.vocab.to_pylist()]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in encoded])
    out = [("vocab_offsets", offsets), ("vocab_bytes", np.frombuffer(b"".join(encoded), dtype=np.uint8))]
    for n in range(model.order):
        out += [(f"keys{n + 1}", model.keys[n].astype(np.int64)), (f"logp{n + 1}", model.logp[n].astype(np.float32))]
        if n < model.order - 1:
            out.append((f"backoff{n + 1}", model.backoff[n].astype(np.float32)))
    return out


def write_binary(model: Model, path: Path, *, language: str | None, normalization: int) -> None:
    arrays = _arrays(model)
    layout, offset = {}, 0
    for name, arr in arrays:
        layout[name] = [offset, arr.dtype.str, int(arr.size)]
        offset += _aligned(arr.nbytes)
    header = json.dumps({"order": model.order, "vocab": model.size, "language": language,
                         "normalization": normalization, "arrays": layout}, sort_keys=True).encode()
    with open(path, "wb") as fh:
        fh.write(MAGIC + struct.pack("<Q", len(header)) + header)
        fh.write(b"\0" * (_aligned(fh.tell()) - fh.tell()))
        for _, arr in arrays:
            fh.write(arr.tobytes())
            fh.write(b"\0" * (_aligned(arr.nbytes) - arr.nbytes))


def _aligned(n: int) -> int:
    return (n + 7) // 8 * 8


def read_header(path: Path) -> dict:
    """The binary model's header (with ``data_offset``: where its arrays start); a file of another kind is a
    ``ConfigError`` naming it."""
    with open(path, "rb") as fh:
        head = fh.read(len(MAGIC) + 8)
        if len(head) < len(MAGIC) + 8 or head[:len(MAGIC)] != MAGIC:
            raise ConfigError(f"{path}: not a tokenmill n-gram model (no {MAGIC[:-1].decode()} header); give the "
                              "directory `tokenmill lm train --out DIR` wrote")
        (length,) = struct.unpack("<Q", head[len(MAGIC):])
        header = json.loads(fh.read(length))
    return {**header, "data_offset": _aligned(len(MAGIC) + 8 + length)}


class NgramModel:
    """A ``model.tmlm`` loaded (memory-mapped): ``ids`` maps words to ids, ``score`` scores sentences."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        self.header = read_header(path)
        start = self.header["data_offset"]
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        arrays = {}
        for name, (offset, dtype, count) in self.header["arrays"].items():
            arrays[name] = np.frombuffer(raw, dtype=np.dtype(dtype), count=count, offset=start + offset)
        self.order, self.size = self.header["order"], self.header["vocab"]
        self.language = self.header.get("language")
        self.keys = [arrays[f"keys{n}"] for n in range(1, self.order + 1)]
        self.logp = [arrays[f"logp{n}"].astype(np.float64) for n in range(1, self.order + 1)]
        self.backoff = [arrays[f"backoff{n}"].astype(np.float64) for n in range(1, self.order)]
        data, offs = arrays["vocab_bytes"].tobytes(), arrays["vocab_offsets"]
        self.ids = {data[offs[i]:offs[i + 1]].decode("utf-8"): i for i in range(self.size)}

    def encode(self, sentences: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Flat ids of ``<s> words </s>`` per sentence (unknown words: ``<unk>``) and each sentence's start."""
        ids = self.ids
        flat: list[int] = []
        starts = []
        for words in sentences:
            starts.append(len(flat))
            flat.append(BOS)
            flat += [ids.get(w, UNK) for w in words]
            flat.append(EOS)
        return np.asarray(flat, dtype=np.int64), np.asarray(starts, dtype=np.int64)

    def score(self, sentences: list[list[str]]) -> np.ndarray:
        """log10 p of each sentence (its words and ``</s>``, after ``<s>``): what ``kenlm.Model.score`` gives."""
        ids, starts = self.encode(sentences)
        if not len(starts):
            return np.zeros(0)
        per_word = self.word_scores(ids, starts)
        return np.add.reduceat(per_word, starts)  # the <s> position holds 0

    def word_scores(self, ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """log10 p of each position given the words before it in its sentence (0 at every ``<s>``)."""
        length = len(ids)
        start = np.repeat(starts, np.diff(np.r_[starts, length]))
        pos = np.arange(length)
        found = [ids.copy()]  # found[n-1][i]: the index of the n-gram ending at i, or -1
        for n in range(2, self.order + 1):
            prev = np.full(length, -1, dtype=np.int64)
            prev[1:] = found[n - 2][:-1]
            ok = (prev >= 0) & (pos - n + 1 >= start)
            found.append(self._lookup(n, np.where(ok, prev * self.size + ids, -1), ok))
        longest = np.zeros(length, dtype=np.int64)
        for n in range(self.order, 0, -1):
            longest = np.where((longest == 0) & (found[n - 1] >= 0), n, longest)
        score = np.zeros(length)
        for n in range(1, self.order + 1):
            hit = longest == n
            score[hit] = self.logp[n - 1][found[n - 1][hit]]
        for k in range(1, self.order):  # the backoff of every context longer than the one matched
            ctx = np.full(length, -1, dtype=np.int64)
            ctx[1:] = found[k - 1][:-1]
            use = (ctx >= 0) & (longest <= k)
            score[use] += self.backoff[k - 1][ctx[use]]
        score[pos == start] = 0.0
        return score

    def _lookup(self, n: int, keys: np.ndarray, ok: np.ndarray) -> np.ndarray:
        table = self.keys[n - 1]
        at = np.searchsorted(table, keys)
        hit = ok & (at < len(table))
        hit[hit] = table[at[hit]] == keys[hit]
        return np.where(hit, at, -1)
