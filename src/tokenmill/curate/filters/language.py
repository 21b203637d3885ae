"""``language``: language identification with py3langid's model (shipped inside its PyPI wheel).

Statistics (ledger columns): ``language.label`` (ISO 639-1 where one exists, else the model's ISO 639-3
code, ``zxx`` for text without linguistic content) and ``language.score`` (the label's probability,
py3langid's normalised posterior). Rules: ``wrong_language`` (label not in ``languages``),
``low_score`` (score below ``threshold``). An empty ``languages`` list keeps every language and only
applies the threshold.

Labels: the model's ``no`` is trained on Bokmål and has a separate ``nn`` (Nynorsk) class, so it is
reported as ``nb``; asking for ``no`` keeps both ``nb`` and ``nn``. Three-letter codes of languages that
have a two-letter one are accepted in ``languages`` (``eng`` -> ``en``).

Scoring is batched (:mod:`tokenmill.curate.filters.langid_batch`: py3langid's model, its byte automaton run
with numpy over the whole batch, the same labels as py3langid's own per-byte loop): it reads the first
``max_chars`` characters of each document (newlines become spaces); measured in BENCHMARKS.md.
``candidates`` restricts the model to a set of labels (a scoring parameter: it changes the scores).
``disambiguate: true`` re-labels documents py3langid calls Indonesian or Malay with lingua's detector
restricted to those two (the ``lingua`` extra): py3langid confuses them most (see BENCHMARKS.md); the score
stays py3langid's.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.curate.filters.langid_batch import BatchIdentifier
from tokenmill.curate.filters.langid_cache import cached_tables
from tokenmill.errors import MissingExtraError
from tokenmill.steps.contract import Scored

SHIPPED_LABELS = frozenset((
    "af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa fi fr fy ga gd gl gu ha he hi "
    "hr ht hu hy id ig is it ja jv ka kk km kn ko ku ky la lg ln lo lt lv mg mk ml mn mr ms my ne nl "
    "no om or pa pl ps pt qu ro ru sa si sk sl so sq sr sv sw ta te th tl tr ug uk ur uz vi xh yo zh "
    "zu zxx ace bcl dz ext gcf gom grc gug hbo kik nso pcm rw se sn st an ary crh fo fuv gcr guw kab "
    "lb lij ltg uzs wa sdh arz ba mt nn oc tg tk tt vec vo wuu yue "
).split())  # the labels of py3langid 0.4's shipped model
MODEL_TO_ISO = {"no": "nb"}  # the model's Bokmål class
ALIASES = {"no": ("nb", "nn"), "nob": ("nb",), "nno": ("nn",)}
THREE_TO_TWO = {
    "eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es", "ita": "it", "por": "pt",
    "nld": "nl", "dut": "nl", "rus": "ru", "pol": "pl", "ces": "cs", "cze": "cs", "swe": "sv", "dan": "da",
    "fin": "fi", "hun": "hu", "tur": "tr", "ell": "el", "gre": "el", "ara": "ar", "arb": "ar", "heb": "he",
    "hin": "hi", "jpn": "ja", "zho": "zh", "chi": "zh", "cmn": "zh", "kor": "ko", "vie": "vi", "ind": "id",
    "msa": "ms", "may": "ms", "zsm": "ms", "ukr": "uk", "ron": "ro", "rum": "ro", "bul": "bg", "cat": "ca",
    "slk": "sk", "slv": "sl", "hrv": "hr", "srp": "sr", "est": "et", "lav": "lv", "lit": "lt", "fas": "fa",
    "per": "fa", "pes": "fa", "urd": "ur", "ben": "bn", "tam": "ta", "tha": "th", "isl": "is", "gle": "ga",
    "cym": "cy", "eus": "eu", "glg": "gl", "afr": "af", "swa": "sw", "swh": "sw",
}


def normalise_codes(codes: Any) -> tuple[str, ...]:
    """User language codes -> the labels this step reports; ``ValueError`` for a non-list."""
    if codes is None:
        return ()
    if isinstance(codes, str):
        codes = [codes]
    if not isinstance(codes, (list, tuple)) or not all(isinstance(c, str) and c for c in codes):
        raise ValueError(f"languages: expected a list of language codes such as [en, de], got {codes!r}")
    out: list[str] = []
    for code in codes:
        c = code.strip().lower().replace("_", "-").split("-")[0]
        c = THREE_TO_TWO.get(c) or c
        out.extend(ALIASES.get(c, (c,)))
    return tuple(dict.fromkeys(out))


def _model_codes(labels: tuple[str, ...]) -> list[str]:
    back = {v: k for k, v in MODEL_TO_ISO.items()}
    return [back.get(label, label) for label in labels]


_LOADED: dict[tuple, Any] = {}


def _load(model: str | None, candidates: list[str] | None) -> Any:
    """The batch identifier of ``model`` (None: the shipped one) restricted to ``candidates``, its tables
    memory-mapped from the cache where an earlier load left them (:mod:`tokenmill.curate.filters.langid_cache`)."""
    from py3langid.langid import MODEL_DIR, MODEL_FILE

    path = Path(model).absolute() if model else MODEL_DIR / MODEL_FILE
    wanted = _model_codes(tuple(candidates)) if candidates else []
    return BatchIdentifier(cached_tables(path, wanted, lambda: _identifier(path, wanted)))


def _identifier(path: Path, wanted: list[str]) -> Any:
    from py3langid.langid import LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(path, norm_probs=True)
    if wanted:
        unknown = sorted(set(wanted) - set(ident.labels))
        if unknown:
            raise ValueError(f"candidates: the model has no label(s) {', '.join(unknown)}")
        ident.set_languages(wanted)
    return ident


@dataclass(frozen=True)
class Language:
    languages: Any = ("en",)
    threshold: float = 0.65
    candidates: Any = None  # restrict the model to these labels (None: all of its 140)
    max_chars: int = 10_000
    model: str | None = None  # a py3langid model file (.npz.xz) to use instead of the shipped one
    disambiguate: bool = False  # re-label Indonesian/Malay with lingua (the lingua extra)
    _identifier: Any = field(default=None, init=False, repr=False, compare=False)
    _pair: Any = field(default=None, init=False, repr=False, compare=False)

    name: ClassVar[str] = "language"
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ("languages", "threshold")
    thresholds: ClassVar[dict] = {"score": "threshold"}

    def __post_init__(self) -> None:
        object.__setattr__(self, "languages", list(normalise_codes(self.languages)))
        if self.candidates is not None:
            object.__setattr__(self, "candidates", list(normalise_codes(self.candidates)))
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) \
                or not 0 <= self.threshold <= 1:
            raise ValueError(f"threshold: expected a probability between 0 and 1, got {self.threshold!r}")
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars <= 0:
            raise ValueError(f"max_chars: expected a positive whole number, got {self.max_chars!r}")
        if self.model is not None and not Path(self.model).is_file():
            raise ValueError(f"model: no language-ID model file at {self.model!r}; give the path of a "
                             "py3langid model (.npz.xz) or leave 'model' out to use the shipped one")
        if importlib.util.find_spec("py3langid") is None:
            raise MissingExtraError("py3langid", "curate", "identify languages")
        if self.candidates and self.model is None:
            unknown = sorted(set(_model_codes(tuple(self.candidates))) - SHIPPED_LABELS)
            if unknown:
                raise ValueError(f"candidates: the shipped model has no label(s) {', '.join(unknown)}")
        self._check_languages()
        if not isinstance(self.disambiguate, bool):
            raise ValueError(f"disambiguate: expected true or false, got {self.disambiguate!r}")
        if self.disambiguate and importlib.util.find_spec("lingua") is None:
            raise MissingExtraError("lingua-language-detector", "lingua", "tell Indonesian from Malay")

    def _check_languages(self) -> None:
        """Every kept language is one the identifier can report: an unknown code would remove every document."""
        if self.model is not None and not self.candidates:
            return  # a model of one's own: its labels are known once it is loaded
        reported = set(self.candidates) if self.candidates else {MODEL_TO_ISO.get(x, x) for x in SHIPPED_LABELS}
        unknown = [c for c in self.languages if c not in reported]
        if unknown:
            where = "candidates" if self.candidates else "the shipped model's labels"
            raise ValueError(f"languages: {', '.join(map(repr, unknown))} is not a language the identifier reports "
                             f"(not among {where}), so every document would be removed; use ISO 639-1 codes such as "
                             f"en, de, fr (known: {' '.join(sorted(reported))})")

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_identifier"] = state["_pair"] = None  # rebuilt by setup() in each worker
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def warm(self) -> None:
        """Load the identifier into this process's cache (a fork server does, for every worker it forks)."""
        self._loaded()

    def _loaded(self) -> Any:
        key = (self.model, tuple(self.candidates or ()))
        if key not in _LOADED:  # one model per process, whatever the number of steps or runs using it
            _LOADED[key] = _load(self.model, self.candidates)
        return _LOADED[key]

    def setup(self) -> None:
        if self._identifier is not None:
            return
        object.__setattr__(self, "_identifier", self._loaded())
        if self.disambiguate:
            from lingua import Language as L
            from lingua import LanguageDetectorBuilder

            object.__setattr__(self, "_pair", LanguageDetectorBuilder.from_languages(L.INDONESIAN, L.MALAY).build())

    def score(self, batch: pa.RecordBatch) -> Scored:
        self.setup()
        text = pc.utf8_slice_codeunits(batch.column("text"), 0, self.max_chars)
        text = pc.replace_substring(text, "\n", " ")
        found, scores = self._identifier.classify(text.to_pylist())
        labels = [MODEL_TO_ISO.get(label, label) for label in found]
        if self._pair is not None:
            self._relabel_pair(text, labels)
        return Scored({"label": pa.array(labels, pa.string()), "score": scores})

    def _relabel_pair(self, text: pa.Array, labels: list[str | None]) -> None:
        """Indonesian and Malay share most of their vocabulary; lingua's word models tell them apart."""
        from lingua import Language as L

        rows = [i for i, label in enumerate(labels) if label in ("id", "ms")]
        found = self._pair.detect_languages_in_parallel_of([text[i].as_py() for i in rows])
        for i, lang in zip(rows, found):
            if lang is not None:
                labels[i] = "id" if lang == L.INDONESIAN else "ms"

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        label, score = scores["label"], np.asarray(scores["score"], dtype=np.float64)
        out = np.full(len(score), None, dtype=object)
        out[~(score >= self.threshold)] = "low_score"
        if self.languages:
            keep = pc.is_in(pa.array(label, pa.string()), value_set=pa.array(self.languages, pa.string()))
            out[~np.asarray(pc.fill_null(keep, False))] = "wrong_language"
        return out
