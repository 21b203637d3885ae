"""Decontamination: remove documents (or SFT examples) that share word n-grams with evaluation sets.

Eval files (JSONL, JSON, CSV, Parquet, or a directory of them: one benchmark per file, or per directory
when a directory is given) are read once per worker in :meth:`Decontaminate.setup`; the text of each item
comes from ``fields`` when given, else from the layout detected per file:

==============  =====================================================
GSM8K           ``question``
MATH            ``problem``
MMLU            ``question`` and ``choices`` (HF layout), or a header-less CSV ``question,A,B,C,D,answer``
HumanEval       ``prompt``
MBPP            ``text``
==============  =====================================================

Every item contributes the hash of each run of ``ngram`` consecutive words (13 by default); an item with fewer
words contributes itself whole when it has at least ``min_words`` pieces, so short questions are not missed.
Words are the text's whitespace-separated words; each is hashed as its normalised pieces (lower case, runs of
punctuation and symbols cut it: ``37.5°C`` is one word of pieces ``37 5 c``; see
:func:`ngrams.word_pieces`). So an n-gram is 13 words of the text as written, however many pieces a formula
breaks into, and a whole short item matches only as a run of whole words. (Version 1 counted pieces as words:
an 8-word fragment of a formula-laden MATH or MMLU problem made a 13-"word" match, and clean documents sharing
only such a fragment were removed.) A document is contaminated when at least ``min_matches`` of its runs
occur in a benchmark; the reason names the benchmark (``decontaminate_v2:gsm8k_test``) and the ledger holds
``decontaminate.matches``, ``decontaminate.benchmark`` (the benchmark with most matches), and what the first
match was: ``decontaminate.ngram`` (the words as the document wrote them) and ``decontaminate.item`` (the eval
item, ``gsm8k_test #17: text``), so a removal can be checked by eye.

Cost: the index is a sorted ``uint64`` array (8 bytes per distinct eval n-gram: all of GSM8K, MATH-500,
MMLU and HumanEval make about 3 MB); each batch is hashed with :func:`ngrams.span_hashes` and looked up
with one ``searchsorted``.
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from tokenmill.curate import ngrams
from tokenmill.errors import ConfigError
from tokenmill.steps.contract import Scored

LAYOUTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("mmlu", ("question", "choices")),
    ("gsm8k", ("question",)),
    ("math", ("problem",)),
    ("humaneval", ("prompt",)),
    ("mbpp", ("text",)),
)
EVAL_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


@dataclass(frozen=True)
class EvalIndex:
    hashes: np.ndarray  # sorted unique uint64 n-gram (and whole short item) hashes
    bench: np.ndarray  # int32: index into names of the benchmark each hash came from (the first one)
    short_lengths: tuple[int, ...]  # word counts of whole short items present in the index
    names: tuple[str, ...]
    items: dict[str, int]  # items read per benchmark
    item: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))  # per hash: its item (below)
    item_labels: tuple[str, ...] = ()  # every item read, in order: "gsm8k_test #17"
    item_texts: tuple[str, ...] = ()  # and its text, to show what a removed document matched
    present: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=bool))  # a one-probe prefilter

    def __post_init__(self) -> None:
        bits = int(min(26, max(10, np.ceil(np.log2(max(len(self.hashes), 1) * 16)))))
        present = np.zeros(1 << bits, dtype=bool)
        present[self.hashes >> np.uint64(64 - bits)] = True
        object.__setattr__(self, "present", present)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """Benchmark index of each hash, -1 where it is not in the index.

        A table of ``16 x len(index)`` flags (at most 64 MB), indexed by the hash's top bits, rules out
        almost every n-gram with one memory access; only the few that pass are binary-searched.
        """
        pos = self.positions(hashes)
        return np.where(pos >= 0, self.bench[np.maximum(pos, 0)] if len(self.bench) else -1, -1).astype(np.int32)

    def positions(self, hashes: np.ndarray) -> np.ndarray:
        """Position of each hash in the index, -1 where it is not in it (see :meth:`lookup`)."""
        out = np.full(len(hashes), -1, dtype=np.int64)
        if not len(self.hashes) or not len(hashes):
            return out
        bits = int(np.log2(len(self.present)))
        cand = np.nonzero(self.present[hashes >> np.uint64(64 - bits)])[0]
        h = hashes[cand]
        pos = np.minimum(np.searchsorted(self.hashes, h), len(self.hashes) - 1)
        out[cand] = np.where(self.hashes[pos] == h, pos, -1)
        return out


def eval_sources(paths: Sequence[str]) -> list[tuple[str, Path]]:
    """``(benchmark name, file)`` for every eval file: a file is its own benchmark (its stem), a directory
    one benchmark named after it."""
    out: list[tuple[str, Path]] = []
    for given in paths:
        p = Path(given)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in EVAL_SUFFIXES)
            if not files:
                raise ConfigError(f"decontaminate: eval directory {given!r} holds no {'/'.join(EVAL_SUFFIXES)} file")
            out.extend((p.name, f) for f in files)
        elif p.is_file():
            out.append((p.name.split(".")[0], p))
        else:
            raise ConfigError(f"decontaminate: eval file {given!r} not found")
    return out


def read_items(path: Path) -> list[Any]:
    """The records of one eval file: dicts (JSONL, JSON, Parquet, CSV with a header) or lists (header-less CSV)."""
    suffix = path.suffix
    try:
        if suffix == ".jsonl":
            return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if suffix == ".json":
            doc = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(doc, dict):
                doc = next((v for v in doc.values() if isinstance(v, list)), [doc])
            return list(doc)
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        if suffix == ".csv":
            return _read_csv(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"decontaminate: cannot read eval file {path}: {exc}") from exc
    raise ConfigError(f"decontaminate: {path}: unsupported eval format (use {', '.join(EVAL_SUFFIXES)})")


def _read_csv(text: str) -> list[Any]:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return []
    header = [h.strip().lower() for h in rows[0]]
    if any(name in header for _, fields in LAYOUTS for name in fields):
        return [dict(zip(header, r)) for r in rows[1:]]
    return rows  # header-less (MMLU's own CSVs): question, choices..., answer


def item_texts(items: list[Any], *, fields: Sequence[str] | None, where: str) -> list[str]:
    """The eval texts of the items, one per field of each item (a question and its choices are indexed
    apart, so a document quoting only the question is still found), from ``fields`` or the detected layout."""
    if not items:
        return []
    if isinstance(items[0], list):  # header-less CSV (MMLU's own): question, choices..., answer letter
        return [t for r in items for t in (str(r[0]), " ".join(map(str, r[1:-1])))]
    use = list(fields) if fields else _detect(items, where)
    return [_flatten(r.get(f)) for r in items if isinstance(r, dict) for f in use]


def _detect(items: list[Any], where: str) -> list[str]:
    keys = set().union(*(r.keys() for r in items[:50] if isinstance(r, dict)))
    for _, wanted in LAYOUTS:
        if all(k in keys for k in wanted):
            return list(wanted)
    known = "; ".join(f"{name}: {', '.join(f)}" for name, f in LAYOUTS)
    raise ConfigError(f"decontaminate: {where}: cannot tell which fields hold the eval text (columns "
                      f"{sorted(keys)}); give them with fields: [...]. Known layouts: {known}")


def _flatten(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(_flatten(v) for v in value)
    if isinstance(value, dict):
        return " ".join(_flatten(v) for v in value.values())
    return str(value)


def build_index(paths: Sequence[str], *, fields: Sequence[str] | None, ngram: int, min_words: int) -> EvalIndex:
    names: list[str] = []
    items: dict[str, int] = {}
    all_h, all_b, all_i, short, labels, shown = [], [], [], set(), [], []
    for name, path in eval_sources(paths):
        if name not in names:
            names.append(name)
        b = names.index(name)
        records = read_items(path)
        texts = item_texts(records, fields=fields, where=str(path))
        labels += [f"{name} #{items.get(name, 0) + i}" for i in range(len(texts))]
        first_item = len(shown)
        shown += texts
        items[name] = items.get(name, 0) + len(records)
        w = ngrams.word_pieces(texts)
        h, item = ngrams.span_hashes(w, ngram)
        whole, lengths, pieces = ngrams.whole_spans(w)
        small = (lengths < ngram) & (pieces >= min_words)
        short.update(int(n) for n in np.unique(lengths[small]))
        all_h += [h, whole[small]]
        all_b += [np.full(len(h) + int(small.sum()), b, dtype=np.int32)]
        all_i += [(item + first_item).astype(np.int32), (np.flatnonzero(small) + first_item).astype(np.int32)]
    empty = [n for n in names if not items[n]]
    if empty:
        raise ConfigError(f"decontaminate: eval set {', '.join(empty)} holds no items ({', '.join(paths)}): there is "
                          "nothing to decontaminate against; check the eval file (or directory) given")
    h = np.concatenate(all_h) if all_h else np.zeros(0, dtype=np.uint64)
    b = np.concatenate(all_b) if all_b else np.zeros(0, dtype=np.int32)
    i = np.concatenate(all_i) if all_i else np.zeros(0, dtype=np.int32)
    h, first = np.unique(h, return_index=True)
    return EvalIndex(h, b[first], tuple(sorted(short)), tuple(names), items, i[first], tuple(labels), tuple(shown))


_INDEXES: dict[tuple, EvalIndex] = {}


@dataclass(frozen=True)
class Decontaminate:
    """Remove documents sharing ``min_matches`` or more word ``ngram``-grams with an eval set."""

    eval: tuple[str, ...] = ()
    fields: tuple[str, ...] | None = None
    ngram: int = 13
    min_words: int = 8
    min_matches: int = 1
    column: str = "text"  # the document column checked (``prompt``/``response`` on SFT batches)
    name: str = "decontaminate"
    version: int = 2
    decision_params: ClassVar[tuple] = ("min_matches",)  # the others change the n-grams matched
    eval_digest: str = field(default="", init=False)

    def __post_init__(self) -> None:
        evals = (self.eval,) if isinstance(self.eval, str) else tuple(self.eval or ())
        if not evals:
            raise ValueError("eval: give at least one eval file or directory")
        object.__setattr__(self, "eval", evals)
        if self.fields is not None:
            object.__setattr__(self, "fields", (self.fields,) if isinstance(self.fields, str) else tuple(self.fields))
        for key in ("ngram", "min_words", "min_matches"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{key}: expected a whole number >= 1, got {v!r}")
        try:
            object.__setattr__(self, "eval_digest", _digest(eval_sources(evals)))
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("decontaminate: ")) from exc

    def index(self) -> EvalIndex:
        key = (self.eval, self.fields, self.ngram, self.min_words, self.eval_digest)
        if key not in _INDEXES:
            _INDEXES[key] = build_index(self.eval, fields=self.fields, ngram=self.ngram, min_words=self.min_words)
        return _INDEXES[key]

    def setup(self) -> None:
        self.index()

    def score(self, batch: pa.RecordBatch) -> Scored:
        idx = self.index()
        column = batch.column(self.column)
        w = ngrams.word_pieces(column)
        n_docs = len(w.offsets) - 1
        doc_parts, bench_parts, first = [], [], {}
        for n in (self.ngram, *idx.short_lengths):
            h, doc = ngrams.span_hashes(w, n)
            pos = idx.positions(h)
            hit = np.flatnonzero(pos >= 0)
            doc_parts.append(doc[hit])
            bench_parts.append(idx.bench[pos[hit]].astype(np.int32))
            for at in hit[::-1]:  # the first match of each document, as (span length, its word, index position)
                first[int(doc[at])] = (n, int(at - np.searchsorted(doc, doc[at])), int(pos[at]))
        docs, benches = np.concatenate(doc_parts), np.concatenate(bench_parts)
        matches = np.bincount(docs, minlength=n_docs).astype(np.int64)
        label = _top_benchmark(docs, benches, n_docs, idx.names)
        shown = _first_matches(column, first, idx, n_docs)
        return Scored({"matches": matches, "benchmark": label, **shown})

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        matches = np.asarray(scores["matches"])
        bench = np.asarray(scores["benchmark"], dtype=object)
        out = np.full(len(matches), None, dtype=object)
        hit = matches >= self.min_matches
        out[hit] = bench[hit]
        return out


def _first_matches(column: Any, first: dict, idx: EvalIndex, n_docs: int) -> dict[str, pa.Array]:
    """``ngram`` (a document's first shared n-gram, as it wrote it) and ``item`` (the eval item it shares it with,
    ``gsm8k_test #17: text``), None where nothing matched: a removal a reader can check by eye."""
    ngram: list[str | None] = [None] * n_docs
    item: list[str | None] = [None] * n_docs
    for d, (n, start, pos) in first.items():
        words = [x for x in str(column[d].as_py() or "").split() if any(_counted(c) for c in x)]
        k = int(idx.item[pos]) if len(idx.item) else -1
        ngram[d] = " ".join(words[start:start + n])
        item[d] = f"{idx.item_labels[k]}: {idx.item_texts[k][:200]}" if k >= 0 else None
    return {"ngram": pa.array(ngram, pa.string()), "item": pa.array(item, pa.string())}


def _counted(char: str) -> bool:
    """Whether a character makes a word count (:func:`ngrams.word_pieces` drops words of punctuation and
    symbols only)."""
    return not unicodedata.category(char).startswith(("P", "S"))


def _top_benchmark(docs: np.ndarray, benches: np.ndarray, n_docs: int, names: tuple[str, ...]) -> np.ndarray:
    """Per document, the benchmark with the most matches (ties: the first named), ``None`` without any."""
    out = np.full(n_docs, None, dtype=object)
    if not len(docs):
        return out
    counts = np.zeros((n_docs, len(names)), dtype=np.int64)
    np.add.at(counts, (docs, benches), 1)
    hit = counts.sum(axis=1) > 0
    out[hit] = np.asarray(names, dtype=object)[counts[hit].argmax(axis=1)]
    return out


def _digest(sources: Iterable[tuple[str, Path]]) -> str:
    import hashlib

    h = hashlib.sha256()
    for name, path in sources:
        h.update(f"{name}\0{path.name}\0".encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()
