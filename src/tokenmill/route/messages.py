"""Find a conversation column: a field whose values are lists of turn dicts.

The role key is a known name (``role``, ``from``, ``speaker``, ``author``, ``sender``) or, failing that,
the key whose values are short strings from a small vocabulary. The content key is a known name
(``content``, ``value``, ``text``, ``message``, ``parts``) or else the longest string key. Content may be a
string or a list of typed parts (``[{"type": "text", "text"|"value": ...}]``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tokenmill.route.profile import (
    ASSISTANT_ROLES,
    CONTENT_KEYS,
    REASONING_WORDS,
    ROLE_KEYS,
    WEIGHT_KEYS,
    Column,
    has_word,
)

PREFERRED_NAMES = ("messages", "conversations", "conversation", "dialog", "dialogue", "turns", "chat")


@dataclass
class MessageLayout:
    column: str
    role_key: str
    content_key: str
    content_parts: bool = False  # content is a list of typed parts
    reasoning_key: str | None = None
    weight_key: str | None = None
    roles: Counter = field(default_factory=Counter)
    fit: int = 0  # rows whose value is a list of turns carrying the role and content keys
    agree: int = 0  # fitting rows with at least one non-empty assistant-side turn


def find_messages(rows: list[dict[str, Any]], cols: dict[str, Column]) -> MessageLayout | None:
    """The best conversation column of ``rows``, or None when no field holds lists of turn dicts."""
    layouts = [_layout(rows, c.name) for c in cols.values() if c.lists]
    layouts = [lay for lay in layouts if lay is not None and lay.fit]
    if not layouts:
        return None
    return max(layouts, key=lambda lay: (lay.fit, lay.column.lower() in PREFERRED_NAMES))


def turn_text(content: Any) -> str:
    """The text of one turn's content: a string, or the text parts of a list of typed parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") or p.get("value") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def split_turns(turns: list, layout: MessageLayout) -> tuple[str, str]:
    """(prompt side, assistant side) text of one conversation."""
    prompt, response = [], []
    for turn in turns:
        if not isinstance(turn, dict):
            continue
        role = str(turn.get(layout.role_key, "")).lower()
        text = turn_text(turn.get(layout.content_key))
        if role in ASSISTANT_ROLES:
            response.append(text)
        elif role != "system":
            prompt.append(text)
    return "\n".join(prompt), "\n".join(response)


def _layout(rows: list[dict[str, Any]], column: str) -> MessageLayout | None:
    items = [t for r in rows if isinstance(r.get(column), list) for t in r[column] if isinstance(t, dict)]
    if not items:
        return None
    keys = Counter(k for t in items for k in t)
    role_key = _role_key(items, keys)
    content_key = _content_key(items, keys, role_key)
    if role_key is None or content_key is None:
        return None
    layout = MessageLayout(column, role_key, content_key)
    layout.content_parts = sum(isinstance(t.get(content_key), list) for t in items) * 2 > len(items)
    layout.reasoning_key = next((k for k in keys if k != content_key and has_word(k, REASONING_WORDS)), None)
    layout.weight_key = next((k for k in WEIGHT_KEYS if k in keys), None)
    _score(rows, layout)
    return layout


def _role_key(items: list[dict], keys: Counter) -> str | None:
    for k in ROLE_KEYS:
        if keys[k] >= 0.9 * len(items):
            return k
    for k, n in keys.items():
        values = [t[k] for t in items if isinstance(t.get(k), str)]
        if n >= 0.9 * len(items) and len(values) == n and len(set(values)) <= 12:
            if sum(map(len, values)) / len(values) <= 24:
                return k
    return None


def _content_key(items: list[dict], keys: Counter, role_key: str | None) -> str | None:
    for k in CONTENT_KEYS:
        if k != role_key and keys[k] >= 0.5 * len(items):
            return k
    lengths = Counter()
    for t in items:
        for k, v in t.items():
            if k != role_key and isinstance(v, str):
                lengths[k] += len(v)
    return lengths.most_common(1)[0][0] if lengths else None


def _score(rows: list[dict[str, Any]], layout: MessageLayout) -> None:
    for row in rows:
        turns = row.get(layout.column)
        if not isinstance(turns, list) or not turns:
            continue
        if not all(isinstance(t, dict) and layout.role_key in t for t in turns):
            continue
        layout.fit += 1
        layout.roles.update(str(t.get(layout.role_key)) for t in turns)
        _, response = split_turns(turns, layout)
        layout.agree += bool(response.strip())
