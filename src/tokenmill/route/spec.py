"""A conversation mapping, checked once: the dict the router writes (and a user may write in a pipeline
file) parsed into a :class:`Spec` the SFT track's normaliser applies. Styles and their keys:
:mod:`tokenmill.sft.normalize`. The router and the mapping check (``route/mapping.py``) read the same
vocabulary, so it lives here, below the SFT track.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenmill.errors import ConfigError, RoutingError

STYLE_ALIASES = {"question_answer": "prompt_response", "problem_solution": "prompt_response"}

# style -> (key, accepted spellings of the key in the mapping, required)
COLUMN_KEYS: dict[str, tuple[tuple[str, tuple[str, ...], bool], ...]] = {
    "prompt_response": (
        ("prompt", ("prompt", "question", "problem"), True),
        ("response", ("response", "completion", "answer", "solution"), True),
    ),
    "alpaca": (
        ("instruction", ("instruction",), True),
        ("output", ("output",), True),
        ("query", ("input", "query"), False),
        ("history", ("history",), False),
    ),
    "sharegpt": (("messages", ("messages",), True), ("response", ("response",), False)),
    "messages": (("messages", ("messages",), True), ("response", ("response",), False)),
}
TURN_KEYS = {"sharegpt": ("from", "value"), "messages": ("role", "content")}
EXTRA_KEYS = ("system", "tools", "reasoning", "id")


@dataclass(frozen=True)
class Spec:
    """A checked mapping: the style, its columns, and the per-turn keys of chat styles."""

    style: str
    columns: dict[str, str | None]
    extras: dict[str, str | None]  # system, tools, reasoning, id
    turn_keys: dict[str, str | None] = field(default_factory=dict)  # role/content/reasoning/weight keys
    meta: tuple[str, ...] | None = None

    def column(self, key: str) -> str:
        """The column of ``key``, one the style requires (:func:`parse_schema` refuses a mapping without it)."""
        col = self.columns.get(key)
        if col is None:
            raise ConfigError(f"style {self.style!r} needs {key!r}: the name of the column that holds it")
        return col

    @property
    def turn_args(self) -> dict[str, str]:
        """The per-turn keys given (role and content always: their style's default when not named)."""
        return {k: v for k, v in self.turn_keys.items() if v is not None}

    @property
    def used(self) -> set[str]:
        return {c for c in (*self.columns.values(), *self.extras.values()) if c is not None}


def parse_schema(schema: Any) -> Spec:
    """Check a mapping once; raise :class:`RoutingError` for non-conversation data, :class:`ConfigError` if bad."""
    if not isinstance(schema, dict):
        raise ConfigError(f"a schema mapping must be a dict, got {_type_name(schema)}")
    if schema.get("record") != "Conversation" or schema.get("style") == "rendered_text":
        raise RoutingError(_refusal(schema))
    style = schema.get("style")
    style = STYLE_ALIASES.get(style, style) if isinstance(style, str) else style
    if not isinstance(style, str) or style not in COLUMN_KEYS:
        styles = ", ".join([*COLUMN_KEYS, *STYLE_ALIASES])
        raise ConfigError(f"unknown conversation style {schema.get('style')!r}; expected one of {styles}")
    problems: list[str] = []
    columns = {key: _column(schema, names, required, style, problems) for key, names, required in COLUMN_KEYS[style]}
    extras = {key: _column(schema, (key,), False, style, problems) for key in EXTRA_KEYS}
    turn_keys = _turn_keys(schema, style, problems)
    meta = schema.get("meta")
    if meta is not None and not (isinstance(meta, (list, tuple)) and all(isinstance(m, str) for m in meta)):
        problems.append(f"'meta' must be a list of column names, got {meta!r}")
    if problems:
        raise ConfigError(problems)
    return Spec(style, columns, extras, turn_keys, None if meta is None else tuple(meta))


def _column(schema: dict, names: tuple[str, ...], required: bool, style: str, problems: list[str]) -> str | None:
    col = next((schema[n] for n in names if schema.get(n) is not None), None)
    if col is None and required:
        problems.append(f"style {style!r} needs {names[0]!r}: the name of the column that holds it")
    elif col is not None and not isinstance(col, str):
        problems.append(f"{names[0]!r} must name a column (a string), got {col!r}")
    return col


def _turn_keys(schema: dict, style: str, problems: list[str]) -> dict[str, str | None]:
    if style not in TURN_KEYS:
        return {}
    role, content = TURN_KEYS[style]
    keys = {
        "role_key": schema.get("role_key") or role,
        "content_key": schema.get("content_key") or content,
        "reasoning_key": schema.get("reasoning_key"),
        "weight_key": schema.get("weight_key"),
    }
    bad = {k: v for k, v in keys.items() if v is not None and not isinstance(v, str)}
    problems.extend(f"{k!r} must be a string, got {v!r}" for k, v in bad.items())
    return keys


def _refusal(schema: dict) -> str:
    record, style = schema.get("record"), schema.get("style")
    if schema.get("chosen") is not None or schema.get("rejected") is not None or style == "preference":
        chosen, rejected = schema.get("chosen"), schema.get("rejected")
        prompt = schema.get("prompt") or "<prompt column>"
        return (
            f"this data holds preference pairs (columns {chosen!r} and {rejected!r}); the SFT track takes "
            f"conversations. To train on the chosen side only, give an explicit mapping: "
            f'{{"record": "Conversation", "style": "messages", "messages": "{chosen}"}} when {chosen!r} holds whole '
            f'conversations, or {{"record": "Conversation", "style": "sharegpt", "messages": "{prompt}", '
            f'"response": "{chosen}"}} when it holds only the reply'
        )
    if record == "Document":
        return (
            f"this data holds documents (text column {schema.get('text')!r}), not conversations; it belongs to "
            "the pretrain track (`tokenmill pretrain`), or give an explicit conversation mapping"
        )
    if style == "rendered_text":
        return (
            f"column {schema.get('text')!r} holds chat text that is already rendered (markers: "
            f"{', '.join(schema.get('markers') or []) or 'unknown'}); the SFT track needs structured turns: convert "
            "them to messages, or train the text on the pretrain track"
        )
    fields = ", ".join(map(str, schema.get("columns") or [])) or "unknown"
    return (
        f"no conversation layout recognised (fields: {fields}); give an explicit mapping such as "
        '{"record": "Conversation", "style": "prompt_response", "prompt": "<column>", "response": "<column>"}'
    )


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__
