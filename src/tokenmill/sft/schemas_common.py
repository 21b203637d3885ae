"""Pieces every input schema shares: the canonical message dict, typed cell access, <think> splitting, tools.

Conventions of the canonical message (``records.MESSAGE``):

- ``tool_calls`` is None when a message makes no call (never an empty list);
- ``reasoning`` is None when absent and ``""`` when present but empty (``<think></think>``);
- tool-call ``arguments`` and the conversation's ``tools`` are JSON strings written with ``json.dumps``
  (``ensure_ascii=False``, default separators), the same text a chat template's ``tojson`` produces;
- every tool in ``tools`` has the OpenAI wrapper ``{"type": "function", "function": {...}}``;
- every tool call has an ``id``: its own, else a deterministic 9-character alphanumeric id (the form
  Mistral's templates require; any template accepts it), which the tool result answering it also gets.
"""

from __future__ import annotations

import json
from typing import Any

from tokenmill.sft.validate import RecordProblem, type_name

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def message(
    role: str,
    content: str | None,
    *,
    reasoning: str | None = None,
    tool_calls: list[dict] | None = None,
    name: str | None = None,
    weight: float | None = None,
    tool_call_id: str | None = None,
) -> dict:
    """One canonical message. A leading ``<think>…</think>`` in assistant text becomes ``reasoning``."""
    if role == "assistant" and reasoning is None and isinstance(content, str):
        reasoning, content = split_think(content)
    return {
        "role": role,
        "content": content,
        "reasoning": reasoning,
        "tool_calls": tool_calls or None,
        "name": name,
        "weight": weight,
        "tool_call_id": tool_call_id,
    }


def split_think(text: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` from text that starts with ``<think>…</think>``; ``(None, text)`` otherwise.

    Newlines around the reasoning and before the answer are dropped, as Qwen3 and DeepSeek-R1 templates do;
    an empty block gives reasoning ``""``. An unclosed ``<think>`` leaves the text as it is.
    """
    stripped = text.lstrip()
    if not stripped.startswith(THINK_OPEN):
        return None, text
    end = stripped.find(THINK_CLOSE)
    if end < 0:
        return None, text
    reasoning = stripped[len(THINK_OPEN) : end].strip("\n")
    return reasoning, stripped[end + len(THINK_CLOSE) :].lstrip("\n")


def cell(row: dict, column: str) -> Any:
    """The value of ``column``, or of a dotted path (``ex.q.text``: as deep as the record goes); a record
    without it is a ``missing_field`` problem."""
    if column in row:
        return row[column]
    value: Any = row
    for part in column.split(".") if "." in column else ():
        if not isinstance(value, dict) or part not in value:
            break
        value = value[part]
    else:
        if "." in column:
            return value
    raise RecordProblem("missing_field", f"the record has no {column!r} field")


def text(value: Any, what: str) -> str:
    """A required string: null is ``missing_field``, another type ``wrong_type``."""
    if value is None:
        raise RecordProblem("missing_field", f"{what} is null")
    if not isinstance(value, str):
        raise RecordProblem("wrong_type", f"{what} is {type_name(value)}, expected a string")
    return value


def optional_text(value: Any, what: str) -> str | None:
    return None if value is None else text(value, what)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def parse_json(value: str, what: str) -> Any:
    try:
        return json.loads(value)
    except ValueError as exc:
        raise RecordProblem("wrong_type", f"{what} is not valid JSON ({exc}): {value[:80]!r}") from None


def tools_json(value: Any) -> str | None:
    """Tool specs given as a list, one dict, or JSON text of either, as a JSON list; None when empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    specs = parse_json(value, "the tools field") if isinstance(value, str) else value
    if isinstance(specs, dict):
        specs = [specs]
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise RecordProblem("wrong_type", f"the tools field must be a list of tool specs, got {type_name(specs)}")
    return dumps([wrap_tool(s, k) for k, s in enumerate(specs)]) if specs else None


def wrap_tool(spec: dict, k: int) -> dict:
    """One tool in the wrapper chat templates expect: ``{"type": "function", "function": {name, ...}}``.

    A bare function schema (``{name, description, parameters}``, as ShareGPT/Glaive data stores them) is
    wrapped, so a tool renders the same way whichever dataset it came from; a wrapped one stays as it is.
    """
    if isinstance(spec.get("function"), dict):
        return spec if "type" in spec else {"type": "function", **spec}
    if isinstance(spec.get("name"), str):
        return {"type": "function", "function": spec}
    raise RecordProblem("wrong_type", f"tool {k} has neither a 'name' nor a 'function' object: {dumps(spec)[:80]}")
