"""Model-based quality filtering, DCLM style: a fastText classifier of "reference-like" vs raw web text.

Training (:func:`train_quality`): positives are high-quality reference text, negatives raw web text (or
one labelled set). Each document is normalised the way it will be scored (:func:`normalise`), long
documents are cut into pieces of at most ``chunk_words`` words so a 40,000-word book does not count as one
example, the smaller class is repeated until both classes weigh the same, and a held-out split (every
``holdout``-th example by a stable hash of its text) gives accuracy and AUC. Training runs on one thread
with a fixed seed, so the same data gives the same model bytes.

Size: a model is ``(words + bucket) x dim`` floats, hundreds of MB for a few MB of text (316 MB for the
reference sets of ``benchmarks/quality.py``). By default (``quantize=True``) the trained model is then
product-quantised the way fastText's ``quantize`` does it (:data:`QUANTIZE`: the 100,000 rows of the
largest norm kept, 2-float sub-vectors coded in one byte, the classifier retrained on the quantised
input): a few MB, with its held-out AUC next to the unquantised model's in the card (``scores.auc`` and
``scores.unquantised``); measured in BENCHMARKS.md ("Quality model size"). ``quantize=False`` keeps the
full model.

The defaults (:data:`DEFAULTS`: word bigrams, 64 dimensions, 25 epochs, learning rate 0.5, a hashed
n-gram table sized to the data by :func:`auto_bucket`) were chosen on
the data in ``benchmarks/quality.py``; fastText's own defaults (unigrams, 5 epochs, lr 0.1) are
markedly worse on DCLM-style labels (see BENCHMARKS.md).

Scoring (:class:`Quality`): the probability of the high-quality class, written to the ledger as
``quality.score``. With ``threshold`` it is a document step; with ``top_fraction`` it is a corpus step
(:mod:`tokenmill.curate.quality.top`): the cut is a percentile of the whole corpus's scores, taken from
the scores every unit wrote, never per unit.

Cost: fastText's ``predict`` is C++ over a batch of strings; normalisation is four ``pyarrow.compute``
passes (lower, two regular expressions, trim). Both are linear in the text length.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill._extras import require
from tokenmill.errors import ConfigError
from tokenmill.steps.contract import Scored

LABEL_HQ, LABEL_LQ = "__label__hq", "__label__lq"
DEFAULTS: dict[str, Any] = {"wordNgrams": 2, "dim": 64, "epoch": 25, "lr": 0.5, "minCount": 2,
                            "loss": "softmax", "bucket": "auto"}
PARAM_TYPES: dict[str, type] = {"wordNgrams": int, "dim": int, "epoch": int, "lr": float, "minCount": int,
                                 "loss": str, "bucket": int, "minn": int, "maxn": int, "neg": int, "ws": int,
                                 "t": float, "lrUpdateRate": int}
LOSSES = ("softmax", "ns", "hs", "ova")
IMBALANCE = 3.0  # a larger-to-smaller class ratio above this is warned about
QUANTIZE: dict[str, Any] = {"cutoff": 100_000, "dsub": 2, "qnorm": True, "retrain": True}
MAX_BUCKET = 2_000_000  # fastText's default: the most hashed n-gram rows a model gets
CARD_SUFFIX = ".card.json"


PUNCT = r"([.,!?;:()\[\]{}\"“”«»])"  # split off as words of their own
# A whitespace run (RE2's ``\s``: tab, newline, form feed, carriage return, space) other than one space: the
# runs ``\s+`` replaces by a space, less those that are one space already, which it replaces by themselves.
# A run that starts with another whitespace character matches the first alternative whole, one that starts
# with a space and goes on the second, and a single space neither (its neighbours are not whitespace).
# Same strings, a third of the time: in text most runs are one space, and each match costs RE2 a restart.
WHITESPACE_RUN = r"[^\S ]\s*| \s+"


def normalise(texts: pa.Array | Sequence[str]) -> pa.Array:
    """Lower-cased text with punctuation split off and all whitespace (newlines too) collapsed to one space."""
    arr = pa.array(texts, type=pa.large_string()) if not isinstance(texts, (pa.Array, pa.ChunkedArray)) else texts
    arr = pc.utf8_lower(pc.fill_null(arr, ""))
    arr = pc.replace_substring_regex(arr, PUNCT, r" \1 ")
    return pc.utf8_trim_whitespace(pc.replace_substring_regex(arr, WHITESPACE_RUN, " "))


def _fasttext() -> Any:
    return require("fasttext", "quality", "train or run the quality classifier")


@dataclass(frozen=True)
class TrainReport:
    model: str
    card: dict


def chunk_words(texts: Sequence[str], *, size: int) -> list[str]:
    """Each normalised text cut into pieces of at most ``size`` words (short texts stay whole)."""
    out: list[str] = []
    for t in texts:
        words = t.split(" ")
        out.extend(" ".join(words[i:i + size]) for i in range(0, len(words), size) if words[i])
    return [t for t in out if t]


def _held_out(text: str, holdout: int) -> bool:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") % holdout == 0


def _balanced(pos: list[str], neg: list[str]) -> list[str]:
    """Labelled lines, the smaller class repeated (whole copies, then a prefix) to match the larger one."""
    big, small = (pos, neg) if len(pos) >= len(neg) else (neg, pos)
    if small:
        reps, extra = divmod(len(big), len(small))
        small = small * reps + small[:extra]
    lab_big, lab_small = (LABEL_HQ, LABEL_LQ) if big is pos else (LABEL_LQ, LABEL_HQ)
    lines = [f"{lab_big} {t}" for t in big] + [f"{lab_small} {t}" for t in small]
    order = sorted(range(len(lines)), key=lambda i: hashlib.blake2b(f"{i}:{lines[i]}".encode(),
                                                                   digest_size=8).digest())
    return [lines[i] for i in order]


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve by the rank-sum formula (ties get their average rank)."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if not n_pos or not n_neg:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def predict_hq(model: Any, texts: pa.Array | Sequence[str]) -> np.ndarray:
    """Probability of the high-quality class for each text (normalised here)."""
    lines = normalise(texts).to_pylist()
    if not lines:
        return np.zeros(0, dtype=np.float32)
    labels, probs = model.predict(lines, k=2)
    out = np.empty(len(lines), dtype=np.float32)
    for i, (lab, p) in enumerate(zip(labels, probs)):
        if len(lab) and lab[0] == LABEL_HQ:
            out[i] = p[0]
        elif len(lab) > 1 and lab[1] == LABEL_HQ:
            out[i] = p[1]
        else:
            out[i] = 1.0 - (p[0] if len(p) else 0.0)
    return np.clip(out, 0.0, 1.0)


def train_quality(
    positives: Sequence[str],
    negatives: Sequence[str],
    *,
    out: str | Path,
    params: Mapping[str, Any] | None = None,
    chunk: int = 400,
    holdout: int = 10,
    seed: int = 0,
    sources: Mapping[str, Any] | None = None,
    quantize: bool = True,
    progress: Callable[[str], None] | None = None,
) -> TrainReport:
    """Train, evaluate on the held-out split, then write ``out`` (the fastText model) and ``out.card.json``.

    ``quantize`` (default) writes the product-quantised model (:data:`QUANTIZE`) and records the held-out
    scores of both; ``False`` writes the full model. ``progress`` is given one line as each long phase starts
    (training, quantising: a minute or two each on a few MB of text, with nothing else to show)."""
    ft = _fasttext()
    opts = {**DEFAULTS, **(params or {})}
    check_params(opts)
    pos = chunk_words(normalise(list(positives)).to_pylist(), size=chunk)
    neg = chunk_words(normalise(list(negatives)).to_pylist(), size=chunk)
    if len(pos) < 2 or len(neg) < 2:
        raise ConfigError(f"quality train needs at least 2 positive and 2 negative examples; got {len(pos)} and "
                          f"{len(neg)} (after dropping empty texts)")
    split = {True: ([], []), False: ([], [])}
    for label, texts in ((True, pos), (False, neg)):
        for t in texts:
            split[_held_out(t, holdout)][0 if label else 1].append(t)
    (tr_pos, tr_neg), (ev_pos, ev_neg) = split[False], split[True]
    lines = _balanced(tr_pos, tr_neg)
    if opts["bucket"] == "auto":
        opts["bucket"] = auto_bucket(lines, opts["wordNgrams"])
    scores = {"train_examples": {"positive": len(tr_pos), "negative": len(tr_neg)},
              "heldout_examples": {"positive": len(ev_pos), "negative": len(ev_neg)},
              "balance": class_balance(len(positives), len(negatives), len(pos), len(neg))}
    held = (ev_pos + ev_neg, [True] * len(ev_pos) + [False] * len(ev_neg)) if ev_pos and ev_neg else None
    model, unquantised = _fit(ft, lines, opts, seed, held=held, quantize=quantize, progress=progress or _quiet)
    if held:
        scores.update(evaluate(model, *held))
    if unquantised:
        scores["unquantised"] = unquantised
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save_model(str(_tmp(out)))  # renamed once the card is written: a killed run leaves no model without its card
    card = {"kind": "tokenmill quality classifier", "format": "fasttext", "labels": [LABEL_HQ, LABEL_LQ],
            "normalisation": "lowercase, punctuation split, whitespace collapsed (tokenmill.curate.quality.classifier.normalise)",
            "params": opts, "quantized": dict(QUANTIZE) if quantize else None, "chunk_words": chunk,
            "holdout_every": holdout, "seed": seed,
            "data": dict(sources or {}), "scores": scores,
            "sha256": hashlib.sha256(_tmp(out).read_bytes()).hexdigest()}
    card_path = Path(str(out) + CARD_SUFFIX)
    _tmp(card_path).write_text(json.dumps(card, indent=2) + "\n")
    os.replace(_tmp(card_path), card_path)  # the card first: what says the model at `out` is tokenmill's
    os.replace(_tmp(out), out)
    return TrainReport(str(out), card)


def _tmp(path: Path) -> Path:
    return Path(f"{path}.tmp")


def check_params(opts: Mapping[str, Any]) -> None:
    """Every fastText parameter known and of its type, before any work (fastText's own errors are tracebacks)."""
    problems = []
    for key, value in opts.items():
        want = PARAM_TYPES.get(key)
        if want is None:
            problems.append(f"unknown fastText parameter {key!r}; known: {', '.join(sorted(PARAM_TYPES))}")
        elif key == "bucket" and value == "auto":
            continue
        elif key == "loss" and value not in LOSSES:
            problems.append(f"loss: expected one of {', '.join(LOSSES)}, got {value!r}")
        elif want is not str and (isinstance(value, bool) or not isinstance(value, (int, float) if want is float else int)):
            problems.append(f"{key}: expected {'a number' if want is float else 'a whole number'}, got {value!r}")
        elif want is not str and isinstance(value, (int, float)) and value < 0:
            problems.append(f"{key}: expected a value >= 0, got {value!r}")
    if problems:
        raise ConfigError([f"quality train: {p}" for p in problems])


def class_balance(pos_docs: int, neg_docs: int, pos_examples: int, neg_examples: int) -> dict[str, Any]:
    """Documents and examples per class, the larger-to-smaller document ratio and whether it is past ``IMBALANCE``."""
    ratio = max(pos_docs, neg_docs) / max(1, min(pos_docs, neg_docs))
    return {"documents": {"positive": pos_docs, "negative": neg_docs},
            "examples": {"positive": pos_examples, "negative": neg_examples},
            "ratio": round(ratio, 2), "larger": "positive" if pos_docs >= neg_docs else "negative",
            "imbalanced": ratio > IMBALANCE}


def auto_bucket(lines: Sequence[str], word_ngrams: int) -> int:
    """Hashed n-gram rows for this data: twice its distinct word n-grams, between 16,384 and fastText's 2M.

    A fixed 2M rows of 64 floats is a 512 MB model whatever the data; sizing the table to the data keeps
    collisions as rare and the model tens of MB for a few MB of training text.
    """
    if word_ngrams <= 1:
        return 0
    seen: set[str] = set()
    for line in lines:
        words = line.split(" ")[1:]
        for n in range(2, word_ngrams + 1):
            seen.update(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))
            if 2 * len(seen) >= MAX_BUCKET:
                return MAX_BUCKET
    return int(min(MAX_BUCKET, max(1 << 14, 2 * len(seen))))


def evaluate(model: Any, texts: Sequence[str], labels: Sequence[bool]) -> dict[str, float]:
    p = predict_hq(model, texts)
    y = np.asarray(labels, dtype=bool)
    return {"accuracy": round(float(((p >= 0.5) == y).mean()), 4), "auc": round(auc(p, y), 4)}


def _quiet(line: str) -> None:
    """No progress lines (the library default)."""


def _fit(ft: Any, lines: list[str], opts: Mapping[str, Any], seed: int, *, held: tuple | None,
         quantize: bool, progress: Callable[[str], None]) -> tuple[Any, dict | None]:
    """The trained model (quantised when asked) and, when quantised, the full model's held-out scores."""
    fd, path = tempfile.mkstemp(prefix="tokenmill-quality-", suffix=".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        progress(f"training fastText on {len(lines):,} examples ({opts['epoch']} epochs, one thread) ...")
        model = ft.train_supervised(input=path, thread=1, seed=seed, verbose=0, **opts)
        if not quantize:
            return model, None
        full = evaluate(model, *held) if held else {}
        progress(f"quantising the model (the {QUANTIZE['cutoff']:,} largest rows kept, classifier retrained) ...")
        model.quantize(input=path, thread=1, verbose=0, **QUANTIZE)
        return model, full
    finally:
        os.unlink(path)


_MODELS: dict[str, Any] = {}


def model_file(path: str) -> str:
    """The model file of ``path``: itself, or ``model.bin`` of a directory `tokenmill quality train` wrote."""
    inside = Path(path) / "model.bin"
    return str(inside) if Path(path).is_dir() and inside.is_file() else path


def load_model(path: str) -> Any:
    """The fastText model at ``path`` (a file, or the directory `tokenmill quality train` wrote), loaded once
    per process."""
    path = model_file(path)
    if path not in _MODELS:
        if not Path(path).is_file():
            raise ConfigError(f"quality: model file {path!r} not found; train one with "
                              "`tokenmill quality train --positive ... --negative ... --out MODEL`")
        ft = _fasttext()
        try:
            _MODELS[path] = ft.load_model(path)
        except ValueError as exc:
            raise ConfigError(f"quality: {path!r} is not a fastText model ({exc})") from exc
    return _MODELS[path]


@dataclass(frozen=True)
class Quality:
    """Score every document with a trained classifier; keep those at or above ``threshold``, or the top
    ``top_fraction`` of the corpus (a corpus-wide percentile)."""

    model: str = ""
    threshold: float | None = None
    top_fraction: float | None = None
    column: str = "text"  # the document column scored (``response`` on SFT batches)
    name: str = "quality"
    version: int = 1
    model_sha256: str = field(default="", init=False)
    thresholds: ClassVar[dict] = {"score": "threshold"}
    decision_params: ClassVar[tuple] = ("threshold",)  # top_fraction replays as a corpus step's new cut
    histogram_stats: ClassVar[dict] = {"score": (0.0, 1.0)}  # the funnel's and the report's score histogram

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ValueError("model: give the path of a model written by `tokenmill quality train`")
        if self.threshold is not None and self.top_fraction is not None:
            raise ValueError("give threshold or top_fraction, not both")
        if self.threshold is not None and not (isinstance(self.threshold, (int, float)) and 0 <= self.threshold <= 1):
            raise ValueError(f"threshold: expected a probability in [0, 1], got {self.threshold!r}")
        if self.top_fraction is not None and not (isinstance(self.top_fraction, (int, float))
                                                  and 0 < self.top_fraction <= 1):
            raise ValueError(f"top_fraction: expected a fraction in (0, 1], got {self.top_fraction!r}")
        if not Path(model_file(self.model)).is_file():
            raise ValueError(f"model: {self.model!r} not found (a model file, or the directory `tokenmill quality "
                             "train` wrote)")
        object.__setattr__(self, "model_sha256", hashlib.sha256(Path(model_file(self.model)).read_bytes()).hexdigest())

    @property
    def corpus(self) -> bool:
        return self.top_fraction is not None

    def setup(self) -> None:
        load_model(self.model)

    def warm(self) -> None:
        """Load the model into this process's cache (a fork server does, for every worker it forks)."""
        load_model(self.model)

    def score(self, batch: pa.RecordBatch) -> Scored:
        return Scored({"score": predict_hq(load_model(self.model), batch.column(self.column))})

    def decide(self, scores: Mapping[str, np.ndarray], *, cut: float | None = None) -> np.ndarray:
        """``low_quality`` below the threshold (or below ``cut``, the corpus-wide percentile)."""
        s = np.asarray(scores["score"], dtype=np.float64)
        limit = self.threshold if cut is None else cut
        out = np.full(len(s), None, dtype=object)
        if limit is not None:
            out[s < limit] = "low_quality"
        return out

    def stages(self, upstream: str) -> list:
        from tokenmill.curate.quality.top import top_fraction_stages

        return top_fraction_stages(self, upstream)
