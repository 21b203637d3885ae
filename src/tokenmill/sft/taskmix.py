"""The SFT task mix: is a prompt an academic, templated task or a natural user request?

Academic tasks are the FLAN / P3 / Super-NaturalInstructions kind: a fixed instruction around a slot
("Answer the following question ...", "Premise: {p} Hypothesis: {h} ..."), an options list "(A) ... (B) ...",
an answer-format instruction ("put your final answer within \\boxed{}"), a closing "Answer:" to complete. A
user request is what a person types to an assistant. Each prompt gets a score in [0, 1] and the names of the
cues that fired (the evidence); the label is ``academic`` at ``THRESHOLD`` or above, else ``user``.

The score is a noisy-OR of the cues' weights, ``1 - prod(1 - w)``, so one strong cue decides and two weak
ones together can. Most of the weight is on cues that read the prompt's *shape*, and so hold in any
language (the language step's ~100 and more):

==================  ======  ==============================================================================
cue                 weight  fires when the prompt ...
==================  ======  ==============================================================================
``options``         0.85    lists lettered choices A, B, C in order: "(A) x (B) y (C) z", lines "A. x",
                            "a) x", full-width "Ａ．", "（A）"
``boxed``           0.85    asks for LaTeX ``\\boxed{}``
``answer_slot``     0.7     ends with a label of one or two words and a colon for the answer: "Answer:",
                            "A:", "Réponse :", "答案：" (not a chat header such as "### Response:")
``template``        0.45    carries a frame (a prefix or suffix of six or more words) that many different
                            prompts of its source share (:mod:`tokenmill.sft.frames`), not a chat wrapper
                            such as Alpaca's "### Instruction:" headers
``latex``           0.5     holds LaTeX math: ``$x^2$``, ``\\frac``, ``\\(...\\)``
``cloze``           0.45    holds a blank to fill: three or more underscores
``fields``          0.3     has two or more lines that open with a short label and a colon ("Premise: ...",
                            "Question: ...") before their text
``word_problem``    0.5     is one paragraph with two or more numbers that ends in a question mark
                            (``?``, ``？``, ``؟``) and does not speak as "I" or ask "can you" (``PERSONAL``):
                            the shape of GSM8K-style exercises
``phrase:<lang>``   0.6     holds a task phrase of language ``<lang>`` ("which of the following", "welche
                            der folgenden", "以下哪") for the languages listed in ``PHRASES``
==================  ======  ==============================================================================

Limits: phrases (and the first-person words of ``PERSONAL``) exist for en, de, fr, es, pt, it, ru, zh and ja
only; in other languages only the structural cues read the prompt (an options list, \\boxed, an answer slot,
a shared template, math, blanks, fields and numbered questions are found in any script), so a bare task
sentence such as "Answer the following question" in Polish without any of those shapes is labelled ``user``.
The template cue counts words by whitespace (:mod:`tokenmill.sft.frames`), so it finds no template in Chinese
or Japanese text. Language is not identified first: every language's phrases are looked for in every prompt
(they do not occur in each other's text).
The weights were set by reading the cues' misses on the real sources of the evaluation in BENCHMARKS.md
("SFT task mix"), whose precision and recall are therefore not blind.

Cost: a few regular expressions per prompt (the phrases only where one of their :func:`anchors` is in it) plus
:func:`tokenmill.sft.frames.without_frames` per source: 4,802 real prompts in 0.9 s on one core of the
benchmark machine (about 3 minutes per million prompts, as much as their MinHash in ``sft select``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenmill.route.content import TAG_MARKERS
from tokenmill.sft.frames import without_frames

ACADEMIC, USER = "academic", "user"
LABELS = (ACADEMIC, USER)
THRESHOLD = 0.5
RULE = "taskmix_v1"  # the name recorded with the labels; a new version when a cue or weight changes
WEIGHTS = {"options": 0.85, "boxed": 0.85, "answer_slot": 0.7, "template": 0.45, "latex": 0.5, "cloze": 0.45,
           "fields": 0.3, "word_problem": 0.5, "phrase": 0.6}

PHRASES = {  # task phrases per language: fixed instructions of academic sets, not what people ask
    "en": r"answer the following|which of the following|which one of the following|choose the (?:correct|best|right)"
          r"|select the (?:correct|best|right)|pick the (?:correct|best|right)|multiple[- ]choice|true or false"
          r"|\boptions:|\bchoices:|answer choices|let'?s think step by step|put your final answer|fill in the blanks?\b"
          r"|does the premise|is the hypothesis|answer with (?:only|just|one)|respond with (?:only|just)"
          r"|(?:express|enter|give|write|round) your answer",
    "de": r"beantworte(?:n sie)? die folgende|welche(?:r|s)? der folgenden|wähle(?:n sie)? die (?:richtige|beste)"
          r"|richtig oder falsch|antwortmöglichkeiten|\boptionen:|schritt für schritt",
    "fr": r"réponds? à la question suivante|répondez à la question suivante|lequel des suivants|laquelle des suivantes"
          r"|lesquel(?:le)?s des suivant|choisisse[zr] la (?:bonne|meilleure)|vrai ou faux|\boptions ?:|\bchoix ?:"
          r"|étape par étape",
    "es": r"responde(?:r)? (?:a )?la siguiente pregunta|responda (?:a )?la siguiente|cuál de (?:las|los) siguientes"
          r"|eli(?:ge|ja) la (?:respuesta )?correcta|seleccione la (?:respuesta )?correcta|verdadero o falso"
          r"|\bopciones:|paso a paso",
    "pt": r"responda (?:à|a) seguinte pergunta|qual d[oa]s seguintes|escolha a (?:alternativa|resposta|opção) correta"
          r"|verdadeiro ou falso|\balternativas:|passo a passo",
    "it": r"rispondi alla seguente domanda|quale (?:delle|dei) seguenti|scegli la (?:risposta|opzione) corretta"
          r"|vero o falso|\bopzioni:|passo dopo passo",
    "ru": r"ответьте на следующий вопрос|ответь на следующий вопрос|как(?:ой|ая|ое|ие) из следующих"
          r"|выберите (?:правильный|верный) (?:ответ|вариант)|верно или неверно|варианты ответов?:|шаг за шагом",
    "zh": r"回答以下问题|回答下列问题|以下哪|下列哪|下列选项|选择正确(?:的)?(?:答案|选项)|判断(?:对错|正误)|选项[:：]"
          r"|一步一步",
    "ja": r"次の(?:質問|問題)に答え|次のうち|正しい(?:もの|答え|選択肢)を(?:選|えら)|選択肢[:：]|正しいか誤りか"
          r"|ステップバイステップ",
}


def anchors(pattern: str) -> list[str]:
    """Of each top-level alternative of ``pattern``, its longest run of plain characters outside groups: text
    every match of that alternative holds. A phrase is searched for only in a prompt holding one of its
    language's anchors (a substring test in C), which makes the phrase cues about 10x cheaper."""
    return [max(_runs(alt), key=len) for alt in _alternatives(pattern)]


def _alternatives(pattern: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(pattern):
        escaped = i > 0 and pattern[i - 1] == "\\"
        depth += (ch == "(" and not escaped) - (ch == ")" and not escaped)
        if ch == "|" and depth == 0 and not escaped:
            out.append(pattern[start:i])
            start = i + 1
    return [*out, pattern[start:]]


def _runs(alt: str) -> list[str]:
    """The runs of plain characters at depth 0 of one alternative (a character a quantifier follows ends a run
    and is left out: it may be absent or repeated)."""
    runs, run, depth, i = [], "", 0, 0
    while i < len(alt):
        ch = alt[i]
        if ch == "\\" or ch in "()[":
            runs.append(run)
            run = ""
            depth += (ch == "(") - (ch == ")")
            i = alt.index("]", i) + 1 if ch == "[" else i + (2 if ch == "\\" else 1)
            if i < len(alt) and alt[i] in "?*+":  # the group, class or escape may be absent or repeated
                i += 1
        elif i + 1 < len(alt) and alt[i + 1] in "?*+{":
            runs.append(run)
            run = ""
            i += 2
        else:
            run += ch if depth == 0 else ""
            i += 1
    return [*runs, run]


_PHRASES = {lang: (re.compile(p), anchors(p)) for lang, p in PHRASES.items()}  # searched in the lower-cased text
PERSONAL = {  # the writer speaking of themself or asking the assistant: a request, not a word problem (words
    # that are also abbreviations in exercises, such as Spanish "mi" and miles, are left out)
    "en": r"i|i'm|i've|i'd|my|me|can you|could you|would you|please",
    "de": r"ich|meine?|mir|mich|kannst du|können sie|bitte",
    "fr": r"je|j'ai|moi|pouvez-vous|peux-tu|s'il vous plaît|s'il te plaît",
    "es": r"yo|puedes|podrías|por favor|necesito",
    "pt": r"eu|você pode|pode me|por favor|preciso",
    "it": r"puoi|potresti|per favore|ho bisogno",
    "ru": r"я|мой|моя|мои|мне|меня|можешь|можете|пожалуйста",
    "zh": r"我|请|你能|您能|帮我",
    "ja": r"私|僕|俺|ください|教えて",
}
_PERSONAL = re.compile(r"(?<!\w)(?:" + "|".join(PERSONAL.values()) + r")(?!\w)", re.I)

_LETTER = r"[A-Ha-hＡ-Ｈ]"
_OPTION_MARKS = re.compile(rf"[(（]({_LETTER})[)）]|(?:^|\n)[ \t]*({_LETTER})[.)．：:）][ \t]", re.M)
_SLOT = re.compile(r"^[^\W\d_][\w'’.-]{0,15}(?: [\w'’.-]{1,15})?\s?[:：]$")  # "Answer:", "Final answer:", "答案："
_LATEX = re.compile(r"\$[^$\n]*(?:\\[a-zA-Z]+|[\^_=])[^$\n]*\$|\\\(|\\\[|\\(?:frac|sqrt|cdot|times|le|ge|pi)\b")
_CLOZE = re.compile(r"_{3,}")
_FIELD = re.compile(r"^[ \t]*[^\W\d_][\w'’-]*(?: [\w'’-]+)?[ \t]?[:：][ \t]*\S", re.M)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_QUESTION_END = re.compile(r"[?？؟]\s*$")


@dataclass(frozen=True)
class TaskLabels:
    """The label, score and cues of each prompt, in the order given."""

    labels: list[str]
    scores: np.ndarray
    cues: list[list[str]]

    def counts(self) -> dict[str, int]:
        return {label: sum(x == label for x in self.labels) for label in LABELS}


def label_prompts(texts: Sequence[str], sources: Sequence[str], *, cores: Sequence[str] | None = None) -> TaskLabels:
    """Label every prompt of ``texts`` (``sources``: each prompt's source, whose shared template is a cue;
    ``cores``: the texts without their frames, when the caller has them already)."""
    cores = without_frames(texts, sources) if cores is None else cores
    framed = [core != text for core, text in zip(cores, texts)]
    cues = [prompt_cues(text, framed=f) for text, f in zip(texts, framed)]
    scores = np.array([score(c) for c in cues], dtype=np.float64)
    return TaskLabels([ACADEMIC if s >= THRESHOLD else USER for s in scores], scores, cues)


def score(cues: Sequence[str]) -> float:
    """The noisy-OR of the cues' weights (a phrase cue, ``phrase:<lang>``, weighs as ``phrase``)."""
    miss = 1.0
    for cue in cues:
        miss *= 1.0 - WEIGHTS[cue.split(":", 1)[0]]
    return round(1.0 - miss, 6)


def prompt_cues(text: str, *, framed: bool = False) -> list[str]:
    """The cues that fire on one prompt (``framed``: it carries a frame many prompts of its source share)."""
    wrapper = bool(TAG_MARKERS["alpaca"].search(text))  # a chat format's headers, not a task's template
    body = TAG_MARKERS["alpaca"].sub("", text) if wrapper else text
    found = [name for name, fires in _SHAPES.items() if fires(body)]
    if framed and not wrapper:
        found.append("template")
    low = body.lower()
    found += [f"phrase:{lang}" for lang, (p, needles) in _PHRASES.items()
              if any(n in low for n in needles) and p.search(low)]
    return found


def _options(text: str) -> bool:
    """Lettered choices A, B, C in order (any case, ASCII or full-width)."""
    letters = [_fold(a or b) for a, b in _OPTION_MARKS.findall(text)]
    return any(letters[i:i + 3] == ["a", "b", "c"] for i in range(len(letters) - 2))


def _fold(letter: str) -> str:
    return chr(ord(letter) - 0xFEE0).lower() if "Ａ" <= letter <= "Ｚ" else letter.lower()


def _answer_slot(text: str) -> bool:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return len(lines) > 1 and bool(_SLOT.match(lines[-1]))


def _word_problem(text: str) -> bool:
    t = text.strip()
    return ("\n\n" not in t and bool(_QUESTION_END.search(t)) and len(_NUMBER.findall(t)) >= 2
            and not _PERSONAL.search(t))


_SHAPES = {"options": _options, "boxed": lambda t: "\\boxed" in t, "answer_slot": _answer_slot,
           "latex": lambda t: bool(_LATEX.search(t)), "cloze": lambda t: bool(_CLOZE.search(t)),
           "fields": lambda t: len(_FIELD.findall(t)) >= 2, "word_problem": _word_problem}


EXAMPLE = "academic=0.3,user=0.7"


def parse_mix(value: str) -> dict[str, float]:
    """``--mix academic=0.3,user=0.7`` -> ``{"academic": 0.3, "user": 0.7}``; ValueError (one line, naming what to
    change) for a malformed pair, an unknown label, a label twice, a negative share or shares not summing to 1."""
    mix: dict[str, float] = {}
    for pair in value.split(","):
        label, eq, share = pair.strip().partition("=")
        if not eq:
            raise ValueError(f"{pair.strip()!r} is not LABEL=SHARE; write e.g. {EXAMPLE}")
        if label.strip() in mix:
            raise ValueError(f"{label.strip()!r} is given twice; give each label once, e.g. {EXAMPLE}")
        try:
            mix[label.strip()] = float(share)
        except ValueError:
            raise ValueError(f"share {share.strip()!r} of {label.strip()!r} is not a number; write e.g. {EXAMPLE}") \
                from None
    return check_mix(mix)


def check_mix(mix: dict[str, float]) -> dict[str, float]:
    """``mix`` when its labels are known, its shares are numbers from 0 to 1 and they sum to 1; else ValueError."""
    unknown = [k for k in mix if k not in LABELS]
    if unknown:
        raise ValueError(f"unknown label {unknown[0]!r}: the labels are {' and '.join(LABELS)}, e.g. {EXAMPLE}")
    bad = {k: v for k, v in mix.items() if isinstance(v, bool) or not isinstance(v, (int, float)) or not v == v}
    if bad:
        raise ValueError(f"share of {next(iter(bad))!r} is not a number; write e.g. {EXAMPLE}")
    negative = [k for k, v in mix.items() if v < 0]
    if negative:
        raise ValueError(f"share of {negative[0]!r} is negative ({mix[negative[0]]}); shares run from 0 to 1, "
                         f"e.g. {EXAMPLE}")
    if abs(sum(mix.values()) - 1.0) > 1e-6:
        raise ValueError(f"shares sum to {sum(mix.values()):g}; they must sum to 1, e.g. {EXAMPLE}")
    return {k: float(v) for k, v in mix.items()}


def quotas(n: int, mix: dict[str, float]) -> dict[str, int]:
    """Examples of each label among ``n`` (largest remainder: they sum to ``n``; ties to the first label)."""
    exact = {label: n * mix.get(label, 0.0) for label in LABELS}
    out = {label: int(v) for label, v in exact.items()}
    for label in sorted(LABELS, key=lambda k: -(exact[k] - out[k]))[:n - sum(out.values())]:
        out[label] += 1
    return out


def mix_shortfall(report: dict) -> str:
    """Which labels kept fewer examples than the mix asked, with the counts ("" when none or no mix)."""
    asked = report.get("asked") or {}
    short = [f"{label} {report['selected'].get(label, 0):,} of {want:,} ({report['scored'].get(label, 0):,} "
             f"scored, {report['cluster_full'].get(label, 0):,} left out as their prompt cluster was full)"
             for label, want in asked.items() if report["selected"].get(label, 0) < want]
    if not short:
        return ""
    return (f"--mix {report['mix_flag']}: kept {'; '.join(short)}; the other labels were not drawn in their place, "
            "so that the mix holds: lower --n, change --mix or raise --per-cluster")
