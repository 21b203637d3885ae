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

# Each pattern matches one turn; the count of matches is the number of turns it marks.
TAG_MARKERS = {
    "chatml": re.compile(r"<\|im_start\|>"),
    "llama3": re.compile(r"<\|start_header_id\|>"),
    "inst": re.compile(r"\[INST\]|\[/INST\]"),
    "gemma": re.compile(r"<start_of_turn>"),
    "role_tags": re.compile(r"<\|(?:system|user|assistant)\|>|<｜(?:User|Assistant)｜>"),
    "alpaca": re.compile(r"#{2,4} ?(?:Instruction|Input|Response|Human|Assistant)\s*:", re.I),
}

SPEAKER_LINE = re.compile(r"^\s*(human|user|prompter|assistant|ai|bot|gpt|chatbot|system)\s*:", re.M | re.I)

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


def transcript_markers(text: str) -> dict[str, int]:
    """Turn markers found in the head of ``text``, by marker family (only families with at least one hit)."""
    text = text[:SCAN_CHARS]
    found = {}
    for name, pattern in TAG_MARKERS.items():
        n = len(pattern.findall(text))
        if n:
            found[name] = n
    speakers = speaker_turns(text)
    if speakers:
        found["speaker_lines"] = speakers
    return found


def speaker_turns(text: str) -> int:
    """Speaker lines (``Human:`` / ``Assistant:`` ...) at line starts; 0 unless both sides speak."""
    names = [m.group(1).lower() for m in SPEAKER_LINE.finditer(text[:SCAN_CHARS])]
    has_user = any(n in ("human", "user", "prompter") for n in names)
    has_assistant = any(n in ("assistant", "ai", "bot", "gpt", "chatbot") for n in names)
    return len(names) if has_user and has_assistant else 0


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
