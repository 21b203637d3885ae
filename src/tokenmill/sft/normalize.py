"""Raw records into canonical conversations (``records.CONVERSATION``), with a reject for every bad one.

The router decides a file's mapping once (the same dict a user may write in the config)::

    {"record": "Conversation", "style": S, <columns of S>,
     "system": col|None, "tools": col|None, "reasoning": col|None, "id": col|None, "meta": [cols]|None}

    S = "prompt_response"  prompt, response   ("question_answer", "problem_solution" are the same layout)
        "alpaca"           instruction, output, input|None, history|None
        "sharegpt"         messages, role_key ("from"), content_key ("value")
        "messages"         messages, role_key ("role"), content_key ("content"); reasoning_key, weight_key
                           (per-turn keys, optional); response|None (a column holding the final reply)

``system`` becomes a leading system message; ``reasoning`` (a column such as ``message_thinking``) goes to
the last assistant message; ``tools`` (a list or JSON text of tool specs) becomes the JSON ``tools``
string; ``meta`` lists the columns kept in the JSON ``meta`` string (default: every column not used).
Preference pairs and documents are refused with :class:`RoutingError`; a bad mapping is a :class:`ConfigError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tokenmill.base.accounting import Reject
from tokenmill.errors import ConfigError, InputError, RoutingError
from tokenmill.io.base import RawBatch
from tokenmill.records import CONVERSATION, record_id
from tokenmill.sft.schemas_chat import chat_messages
from tokenmill.sft.schemas_common import cell, message, optional_text, tools_json
from tokenmill.sft.schemas_pairs import alpaca_messages, pair_messages
from tokenmill.sft.validate import RecordProblem, explain_conversation, type_name

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

    @property
    def used(self) -> set[str]:
        return {c for c in (*self.columns.values(), *self.extras.values()) if c is not None}


def normalize_rows(
    rows: list[dict], locs: list[int], *, source: str, schema: dict, allow_consecutive: bool = False
) -> tuple[list[dict], list[Reject]]:
    """Conversation dicts (``records.CONVERSATION``) for the good rows, a :class:`Reject` for each bad one."""
    spec = parse_schema(schema)
    if len(rows) != len(locs):
        raise InputError(f"{source}: {len(rows)} rows but {len(locs)} locations; pass one location per row")
    kept, rejects = [], []
    for row, loc in zip(rows, locs):
        conv, problem = _normalize_one(row, loc, source=source, spec=spec, allow_consecutive=allow_consecutive)
        if problem is None:
            kept.append(conv)
        else:
            rejects.append(Reject(source, loc, problem[0], problem[1], raw=row))
    return kept, rejects


def normalize_batch(
    batch: RawBatch, *, schema: dict, allow_consecutive: bool = False
) -> tuple[pa.RecordBatch, list[Reject]]:
    """One reader batch (rows or an Arrow table) as a ``CONVERSATION`` record batch plus this step's rejects."""
    kept, rejects = normalize_rows(
        batch.to_rows(), batch.locs, source=batch.source, schema=schema, allow_consecutive=allow_consecutive
    )
    return to_arrow(kept), rejects


def to_arrow(conversations: list[dict]) -> pa.RecordBatch:
    """Conversation dicts as one record batch with the ``records.CONVERSATION`` schema."""
    return pa.RecordBatch.from_pylist(conversations, schema=CONVERSATION)


def normalize_record(row: Any, loc: int, *, source: str, spec: Spec) -> dict:
    """One raw record as a conversation dict; raises :class:`RecordProblem` when its shape is wrong."""
    if not isinstance(row, dict):
        raise RecordProblem("wrong_type", f"the record is {type_name(row)}, expected an object with named fields")
    messages = _style_messages(row, spec)
    extras = spec.extras
    system = optional_text(row.get(extras["system"]), f"the {extras['system']!r} field") if extras["system"] else None
    if system:
        messages.insert(0, message("system", system))
    if extras["reasoning"]:
        _attach_reasoning(messages, row.get(extras["reasoning"]), extras["reasoning"])
    return {
        "id": record_id(row.get(extras["id"]) if extras["id"] else None, source, loc),
        "messages": messages,
        "tools": tools_json(row.get(extras["tools"])) if extras["tools"] else None,
        "source": source,
        "meta": _meta(row, spec),
    }


def parse_schema(schema: Any) -> Spec:
    """Check a mapping once; raise :class:`RoutingError` for non-conversation data, :class:`ConfigError` if bad."""
    if not isinstance(schema, dict):
        raise ConfigError(f"a schema mapping must be a dict, got {type_name(schema)}")
    if schema.get("record") != "Conversation" or schema.get("style") == "rendered_text":
        raise RoutingError(_refusal(schema))
    style = STYLE_ALIASES.get(schema.get("style"), schema.get("style"))
    if style not in COLUMN_KEYS:
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


def _style_messages(row: dict, spec: Spec) -> list[dict]:
    cols = spec.columns
    if spec.style == "prompt_response":
        return pair_messages(row, prompt=cols["prompt"], response=cols["response"])
    if spec.style == "alpaca":
        return alpaca_messages(
            row, instruction=cols["instruction"], output=cols["output"], query=cols["query"], history=cols["history"]
        )
    messages = chat_messages(cell(row, cols["messages"]), **spec.turn_keys)
    if cols["response"]:
        messages.extend(_reply(cell(row, cols["response"]), spec))
    return messages


def _reply(value: Any, spec: Spec) -> list[dict]:
    """The final reply held in its own column (e.g. the ``chosen`` side): text, one turn, or a list of turns."""
    if isinstance(value, str) or value is None:
        return [message("assistant", value)]
    return chat_messages(value if isinstance(value, list) else [value], **spec.turn_keys)


def _attach_reasoning(messages: list[dict], value: Any, column: str) -> None:
    reasoning = optional_text(value, f"the {column!r} field")
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if reasoning is not None and last is not None:
        last["reasoning"] = reasoning


def _meta(row: dict, spec: Spec) -> str | None:
    columns = spec.meta if spec.meta is not None else [k for k in row if k not in spec.used]
    values = {k: row[k] for k in columns if k in row}
    return json.dumps(values, ensure_ascii=False, default=str) if values else None


def _normalize_one(
    row: Any, loc: int, *, source: str, spec: Spec, allow_consecutive: bool
) -> tuple[dict | None, tuple[str, str] | None]:
    """Never raises for bad data: any unexpected shape becomes ``missing_field`` or ``wrong_type``."""
    try:
        conv = normalize_record(row, loc, source=source, spec=spec)
    except RecordProblem as problem:
        return None, (problem.reason, problem.detail)
    except (KeyError, IndexError) as exc:
        return None, ("missing_field", f"the record lacks an expected field or item ({exc!r})")
    except Exception as exc:  # noqa: BLE001 - a record of an unforeseen shape is a reject, not a crash
        return None, ("wrong_type", f"the record has an unexpected shape ({type(exc).__name__}: {exc})")
    return conv, explain_conversation(conv, allow_consecutive=allow_consecutive)


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
