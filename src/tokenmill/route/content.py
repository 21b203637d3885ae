"""Content evidence read from the text of sampled records.

Two detectors, both per record so the router can decide by the share of records that show them:

``transcript_markers(text)``
    Chat-template and turn markers in free text. A document holding two or more turn markers is a
    rendered conversation, not prose: ChatML ``<|im_start|>``, Llama-3 ``<|start_header_id|>``,
    Llama-2/Mistral ``[INST]``, Gemma ``<start_of_turn>``, Zephyr/Phi ``<|user|>``-style tags,
    Alpaca ``### Instruction:`` / ``### Response:`` headers, and speaker lines (``Human:``,
    ``User:``, ``Assistant:``, ...) at line starts when both a user-side and an assistant-side speaker
    appear.

``boilerplate_hits(text)``
    Distinct web-page boilerplate phrases (cookie banners, "all rights reserved", "posted by", ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Each pattern matches one turn; the count of matches is the number of turns it marks.
TAG_MARKERS = {
    "chatml": re.compile(r"<\|im_start\|>"),
    "llama3": re.compile(r"<\|start_header_id\|>"),
    "inst": re.compile(r"\[INST\]|\[/INST\]"),
    "gemma": re.compile(r"<start_of_turn>"),
    "role_tags": re.compile(r"<\|(?:system|user|assistant)\|>|<｜(?:User|Assistant)｜>"),
    "alpaca": re.compile(r"#{2,4} ?(?:Instruction|Input|Response|Human|Assistant)\s*:", re.I),
    "vicuna": re.compile(r"(?<![A-Za-z])(?:USER|ASSISTANT): "),  # inline, upper case: "USER: hi ASSISTANT: hello</s>"
}

SPEAKER_LINE = re.compile(r"^\s*(human|user|prompter|assistant|ai|bot|gpt|chatbot|system)\s*:", re.M | re.I)
USER_SPEAKERS = ("human", "user", "prompter")
ASSISTANT_SPEAKERS = ("assistant", "ai", "bot", "gpt", "chatbot")

# Other speaker conventions: (user-side names, assistant-side names). A family counts only when both sides
# speak at line starts (followed by ":" or a full-width "："). Matched case-insensitively.
SPEAKER_PAIRS = {
    "qa": (("q",), ("a",)),
    "question_answer": (("question",), ("answer",)),
    "input_output": (("input",), ("output",)),
    "customer_agent": (("customer", "client", "caller"), ("agent", "support", "representative", "operator")),
    "patient_doctor": (("patient",), ("doctor",)),
    "korean": (("사용자", "질문", "고객"), ("어시스턴트", "답변", "상담원", "챗봇")),
    "chinese": (("用户", "问", "问题", "用戶", "問", "提问"), ("助手", "答", "回答", "助理", "回复")),
    "japanese": (("ユーザー", "質問", "利用者"), ("アシスタント", "回答", "答え")),
    "spanish": (("usuario", "pregunta", "cliente"), ("asistente", "respuesta", "agente")),
    "russian": (("пользователь", "вопрос", "клиент"), ("ассистент", "ответ", "помощник", "оператор")),
    "french": (("utilisateur", "question", "client"), ("assistant", "assistante", "réponse", "agent")),
}
_PAIR_LINE = {
    name: re.compile(r"^[ \t]*(" + "|".join(re.escape(w) for w in (*u, *a)) + r")[ \t]*[:：]", re.M | re.I)
    for name, (u, a) in SPEAKER_PAIRS.items()
}
# One scan for every family above (they share the line shape): at a line start at most one of their words can
# be followed by optional blanks and a colon, so each family's matches are the matches of this one whose word
# is that family's (checked with the family's own case-insensitive alternation): 1 pass over the text, not 11.
_ANY_PAIR_LINE = re.compile(
    r"^[ \t]*(" + "|".join(re.escape(w) for w in sorted({w for u, a in SPEAKER_PAIRS.values() for w in (*u, *a)}))
    + r")[ \t]*[:：]", re.M | re.I)
_PAIR_WORD = {name: re.compile("|".join(re.escape(w) for w in (*u, *a)), re.I) for name, (u, a) in SPEAKER_PAIRS.items()}
XML_TURNS = re.compile(r"<(user|human|assistant|bot|ai)>.*?</\1>", re.S | re.I)
SPEAKER_COVERAGE = 0.5  # speaker lines must lead the text (start it, or own half its characters)

BOILERPLATE = re.compile(
    r"privacy policy|terms of (?:use|service)|all rights reserved|©|copyright \d{4}|click here|sign up"
    r"|log ?in\b|subscribe|newsletter|share (?:this|on)|skip to (?:main )?content|read more|contact us"
    r"|posted (?:by|on)|leave a (?:comment|reply)|post a comment|follow us|powered by|related posts"
    r"|cookies?\b|home\s*[|»>]",
    re.I,
)


# Content rules read the head of each value: turn markers and boilerplate show there when they show at all,
# and scanning whole book-length documents would make routing cost grow with document size.
SCAN_CHARS = 16_384


# A substring every match of a tag family contains (one of them): a text without any is not scanned.
_TAG_NEEDS = {"chatml": ("<|im_start|>",), "llama3": ("<|start_header_id|>",), "inst": ("INST]",),
              "gemma": ("<start_of_turn>",), "role_tags": ("<|", "<｜"), "alpaca": ("##",),
              "vicuna": ("USER: ", "ASSISTANT: ")}


def transcript_markers(text: str) -> dict[str, int]:
    """Turn markers found in the head of ``text``, by marker family (only families with at least one hit)."""
    text = text[:SCAN_CHARS]
    found = {}
    for name, pattern in TAG_MARKERS.items():
        n = len(pattern.findall(text)) if any(needle in text for needle in _TAG_NEEDS[name]) else 0
        if n:
            found[name] = n
    speakers = speaker_turns(text)
    if speakers:
        found["speaker_lines"] = speakers
    return found


def speaker_turns(text: str) -> int:
    """Speaker lines (``Human:`` / ``Assistant:``, ``Q:`` / ``A:``, ``用户：`` / ``助手：`` ...) at line starts.

    0 unless both sides of one convention speak and the speaker lines lead the text (it starts with one,
    or the turns they open cover half its characters): a news article quoting a two-line exchange is prose.
    """
    return _best_speakers(text[:SCAN_CHARS])[0]


def _best_speakers(text: str) -> tuple[int, str, list[re.Match]]:
    """(turns, convention, its speaker-line matches) of the convention that marks the most turns."""
    found = list(SPEAKER_LINE.finditer(text))
    best = (_turns(text, found, USER_SPEAKERS, ASSISTANT_SPEAKERS), "chat", found)
    lines = list(_ANY_PAIR_LINE.finditer(text))
    for name, (users, assistants) in SPEAKER_PAIRS.items() if lines else ():
        word = _PAIR_WORD[name].fullmatch
        mine = [m for m in lines if word(m.group(1))]
        turns = _turns(text, mine, users, assistants)
        if turns > best[0]:
            best = (turns, name, mine)
    tags = [m.group(1).lower() for m in XML_TURNS.finditer(text)] if "</" in text else []
    if any(t in ("user", "human") for t in tags) and any(t in ("assistant", "bot", "ai") for t in tags):
        best = max(best, (len(tags), "xml", []), key=lambda b: b[0])
    return best


# Conventions that documents use as well as chats: an FAQ page, an interview, a Q&A site's question and answers.
QA_CONVENTIONS = ("qa", "question_answer")
CODE = re.compile(r"^```|^(?: {4}|\t)[ \t]*\S.*\n(?: {4}|\t)[ \t]*\S|[;{][ \t]*$", re.M)
LONG_QA = 1_500  # characters of one question and its answers that read as an article, not a chat turn


@dataclass(frozen=True)
class QaLayout:
    """How a text laid out only in question/answer lines reads (see :func:`qa_layout`)."""

    lead: bool  # prose (a title, an introduction) before the first question
    single: bool  # one question, then its answer(s): not an exchange of turns
    code: bool  # code blocks, indented code or lines ending in ``;`` / ``{``
    long: bool  # the text is at least LONG_QA characters

    def signs(self, *, corpus_meta: bool) -> list[str]:
        """The document signs it shows: a prose lead; or one question with code, length or corpus metadata."""
        signs = ["prose before the first question"] if self.lead else []
        if self.single:
            signs += [s for s, on in (("one question with code", self.code), ("one long question and answer",
                      self.long), ("corpus metadata columns", corpus_meta)) if on]
        return signs


def qa_layout(text: str) -> QaLayout | None:
    """The layout of ``text`` when its turns are marked only by ``Q:``/``A:`` or ``Question:``/``Answer:``
    lines (None when another convention or a chat-template tag marks them, or none does)."""
    text = text[:SCAN_CHARS]
    turns, name, found = _best_speakers(text)
    if name not in QA_CONVENTIONS or turns < 2 or any(p.search(text) for p in TAG_MARKERS.values()):
        return None
    questions = sum(m.group(1).lower() in SPEAKER_PAIRS[name][0] for m in found)
    return QaLayout(lead=bool(text[: found[0].start()].strip()), single=questions == 1,
                    code=bool(CODE.search(text)), long=len(text) >= LONG_QA)


def _turns(text: str, found: list[re.Match], users: tuple[str, ...], assistants: tuple[str, ...]) -> int:
    names = [m.group(1).lower() for m in found]
    if not (any(n in users for n in names) and any(n in assistants for n in names)):
        return 0
    starts_with_one = not text[: found[0].start()].strip()
    covered = len(text) - found[0].start()
    if not starts_with_one and covered < SPEAKER_COVERAGE * len(text.strip()):
        return 0
    if not starts_with_one and len(found) < 4:
        return 0  # a short exchange quoted inside prose
    return len(names)


def turn_count(markers: dict[str, int]) -> int:
    """Turns marked by the strongest marker family of one record."""
    return max(markers.values(), default=0)


def boilerplate_hits(text: str) -> int:
    """Number of distinct web-boilerplate phrases in ``text``."""
    return len({m.group(0).lower() for m in BOILERPLATE.finditer(text[:SCAN_CHARS])})


def looks_like_web_page(text: str) -> bool:
    """A long text with two or more distinct web-boilerplate phrases."""
    return len(text) >= 300 and boilerplate_hits(text) >= 2


def is_question_like(text: str) -> bool:
    """A short request: asks a question or opens with a question word or an imperative verb."""
    head = text.lstrip()[:40].lower()
    return "?" in text or head.startswith(REQUEST_OPENERS)


REQUEST_OPENERS = (
    "what",
    "how",
    "why",
    "when",
    "where",
    "which",
    "who",
    "is ",
    "are ",
    "can ",
    "does ",
    "do ",
    "write",
    "explain",
    "describe",
    "give",
    "list",
    "find",
    "calculate",
    "compute",
    "solve",
    "prove",
    "summarize",
    "summarise",
    "translate",
    "generate",
    "create",
    "classify",
    "rewrite",
    "compare",
    "identify",
    "determine",
    "evaluate",
    "simplify",
    "name ",
    "tell ",
    "suggest",
    "convert",
)
