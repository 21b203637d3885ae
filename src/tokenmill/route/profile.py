"""Column statistics of sampled rows, and the name vocabularies the router matches against.

Names are matched by *token*, not whole string: ``message_thinking`` holds the tokens ``message`` and
``thinking``; ``canonicalSolution`` holds ``canonical`` and ``solution``. So unseen names built from
familiar words still map, and wholly unknown names fall back to content statistics.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

DOCUMENT_WORDS = {"text", "content", "contents", "document", "body", "article", "passage", "markdown", "page"}
PROMPT_WORDS = ("prompt", "instruction", "question", "problem", "query", "request", "input")
RESPONSE_WORDS = {
    "response",
    "completion",
    "answer",
    "output",
    "solution",
    "reply",
    "target",
    "assistant",
    "gpt",
    "content",
}
REASONING_WORDS = {"reasoning", "thinking", "thought", "thoughts", "think", "rationale", "cot"}
TOOLS_WORDS = {"tools", "functions", "tool", "function"}
ID_NAMES = ("id", "_id", "uid", "uuid", "doc_id", "unique_id", "task_id", "key", "idx", "example_id")
URL_NAMES = ("url", "uri", "link", "source_url", "page_url", "warc_target_uri", "target_uri")
LICENSE_NAMES = ("license", "licence", "licenses")
SYSTEM_NAMES = ("system", "system_prompt", "system_message")
HISTORY_NAMES = ("history",)

ROLE_KEYS = ("role", "from", "speaker", "author", "sender")
CONTENT_KEYS = ("content", "value", "text", "message", "parts")
WEIGHT_KEYS = ("loss_weight", "weight", "train", "trainable")
ASSISTANT_ROLES = {
    "assistant",
    "gpt",
    "model",
    "bot",
    "ai",
    "agent",
    "chatbot",
    "chatgpt",
    "function_call",
    "tool_call",
}


@dataclass
class Column:
    """What one top-level field holds across the sampled rows."""

    name: str
    present: int = 0  # rows where the value is not None
    strings: int = 0
    nonempty: int = 0  # non-blank strings
    chars: int = 0  # total length of the strings
    lists: int = 0
    dicts: int = 0
    scalars: int = 0  # numbers and booleans
    dict_keys: Counter = field(default_factory=Counter)  # keys of dict values (one level down)

    @property
    def mean_len(self) -> float:
        return self.chars / self.strings if self.strings else 0.0


def profile(rows: list[dict[str, Any]]) -> dict[str, Column]:
    """Per-field statistics, fields in first-seen order."""
    cols: dict[str, Column] = {}
    for row in rows:
        for name, value in row.items():
            col = cols.setdefault(name, Column(name))
            _count(col, value)
    return cols


def _count(col: Column, value: Any) -> None:
    if value is None:
        return
    col.present += 1
    if isinstance(value, str):
        col.strings += 1
        col.chars += len(value)
        col.nonempty += bool(value.strip())
    elif isinstance(value, list):
        col.lists += 1
    elif isinstance(value, dict):
        col.dicts += 1
        col.dict_keys.update(value.keys())
    elif isinstance(value, (int, float, bool)):
        col.scalars += 1


def name_tokens(name: str) -> set[str]:
    """Lower-case word tokens of a field name (split on punctuation, digits and camelCase)."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", str(name))
    return {t for t in re.split(r"[^a-zA-Z]+", spaced.lower()) if t}


def has_word(name: str, words) -> bool:
    return bool(name_tokens(name) & set(words))


def first_named(cols: dict[str, Column], names, *, kind: str = "any") -> str | None:
    """The first field (in ``names`` order, case-insensitive) present with a value of ``kind``."""
    lower = {str(c).lower(): c for c in cols}
    for n in names:
        col = cols.get(lower.get(n, ""))
        if col is not None and _is_kind(col, kind):
            return col.name
    return None


def _is_kind(col: Column, kind: str) -> bool:
    if kind == "str":
        return col.strings > 0 and col.strings >= col.present / 2
    if kind == "list":
        return col.lists > 0 and col.lists >= col.present / 2
    return col.present > 0


def string_columns(cols: dict[str, Column], n_rows: int, *, min_share: float = 0.5) -> list[Column]:
    """Fields holding strings in at least ``min_share`` of the rows."""
    return [c for c in cols.values() if n_rows and c.strings / n_rows >= min_share]


def nested_field(cols: dict[str, Column], names) -> str | None:
    """A dotted path ``column.key`` to one of ``names`` inside a dict-valued column (one level)."""
    for col in cols.values():
        for key in col.dict_keys:
            if str(key).lower() in names:
                return f"{col.name}.{key}"
    return None
