"""Lists of turns (ShareGPT ``from``/``value`` or OpenAI ``role``/``content``) into canonical messages.

Roles: human/user; gpt/assistant/chatgpt/bing/bard/model; system/developer; tool/observation/function (a
tool result). A ShareGPT ``function_call`` turn holds JSON ``{name, arguments}`` (or a list of them) and
becomes tool calls on the assistant message it follows, or on a new one. OpenAI content may be a list of
typed parts: text parts (``text`` or ``value``) are joined with no separator, other parts are refused.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from tokenmill.sft.schemas_common import dumps, message, optional_text, parse_json, text
from tokenmill.sft.validate import RecordProblem, type_name

ROLE_NAMES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "observation": "tool",
    "function": "tool",
}
FUNCTION_CALL = "function_call"
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
WEIGHT_KEYS = ("weight", "loss_weight", "train")


def chat_messages(
    turns: Any, *, role_key: str, content_key: str, reasoning_key: str | None = None, weight_key: str | None = None
) -> list[dict]:
    """Canonical messages from one record's list of turn dicts."""
    if not isinstance(turns, list):
        raise RecordProblem("wrong_type", f"the messages field is {type_name(turns)}, expected a list of turns")
    out: list[dict] = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise RecordProblem("wrong_type", f"turn {i} is {type_name(turn)}, expected a dict")
        if role_key not in turn or turn[role_key] is None:
            raise RecordProblem("missing_field", f"turn {i} has no {role_key!r} key")
        raw_role = turn[role_key]
        if raw_role == FUNCTION_CALL:
            _add_calls(out, _function_calls(turn.get(content_key), i), _weight(turn, i, weight_key))
            continue
        out.append(_turn_message(turn, i, role_key, content_key, reasoning_key, weight_key))
    _name_tool_results(out)
    return out


def _turn_message(
    turn: dict, i: int, role_key: str, content_key: str, reasoning_key: str | None, weight_key: str | None
) -> dict:
    raw_role = turn[role_key]
    if not isinstance(raw_role, str):
        raise RecordProblem("wrong_type", f"the role of turn {i} is {type_name(raw_role)}, expected a string")
    role = ROLE_NAMES.get(raw_role.lower())
    if role is None:
        raise RecordProblem("unknown_role", f"turn {i} has role {raw_role!r}; expected one of {', '.join(ROLE_NAMES)}")
    return message(
        role,
        _content(turn.get(content_key), i),
        reasoning=_reasoning(turn, i, reasoning_key),
        tool_calls=_openai_calls(turn.get("tool_calls"), i),
        name=optional_text(turn.get("name"), f"the name of turn {i}"),
        weight=_weight(turn, i, weight_key),
        tool_call_id=optional_text(turn.get("tool_call_id"), f"the tool_call_id of turn {i}"),
    )


def _content(value: Any, i: int) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise RecordProblem("wrong_type", f"the content of turn {i} is {type_name(value)}, expected a string or parts")
    pieces = []
    for k, part in enumerate(value):
        if isinstance(part, str):
            pieces.append(part)
            continue
        if not isinstance(part, dict):
            raise RecordProblem("wrong_type", f"content part {k} of turn {i} is {type_name(part)}, expected a dict")
        kind = part.get("type", "text")
        if kind != "text":
            detail = f"content part {k} of turn {i} has type {kind!r}; only text parts are supported"
            raise RecordProblem("unsupported_content_part", detail)
        value_ = part.get("text") if part.get("text") is not None else part.get("value")
        pieces.append(text(value_, f"the text of content part {k} of turn {i}"))
    return "".join(pieces)


def _reasoning(turn: dict, i: int, reasoning_key: str | None) -> str | None:
    keys = (reasoning_key, *REASONING_KEYS) if reasoning_key else REASONING_KEYS
    value = next((turn[k] for k in keys if turn.get(k) is not None), None)
    return optional_text(value, f"the reasoning of turn {i}")


def _weight(turn: dict, i: int, weight_key: str | None) -> float | None:
    keys = (weight_key, *WEIGHT_KEYS) if weight_key else WEIGHT_KEYS
    key = next((k for k in keys if turn.get(k) is not None), None)
    if key is None:
        return None
    value = turn[key]
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise RecordProblem("wrong_type", f"turn {i} has {key} {value!r}; expected a finite number >= 0 or a bool")
    return float(value)


def _openai_calls(calls: Any, i: int) -> list[dict] | None:
    if calls is None:
        return None
    if not isinstance(calls, list):
        raise RecordProblem("wrong_type", f"the tool_calls of turn {i} is {type_name(calls)}, expected a list")
    return [_call(c, f"tool call {k} of turn {i}") for k, c in enumerate(calls)]


def _call(call: Any, where: str) -> dict:
    """``{id, type, function: {name, arguments}}`` or a flat ``{name, arguments}`` as a canonical ToolCall."""
    if not isinstance(call, dict):
        raise RecordProblem("wrong_type", f"{where} is {type_name(call)}, expected a dict")
    fn = call["function"] if isinstance(call.get("function"), dict) else call
    name = text(fn.get("name"), f"the function name of {where}")
    args = fn.get("arguments", fn.get("parameters"))
    if args is None:
        args = "{}"
    elif isinstance(args, str):
        if not isinstance(parse_json(args, f"the arguments of {where}"), dict):
            raise RecordProblem("wrong_type", f"the arguments of {where} are not a JSON object: {args[:80]!r}")
    elif isinstance(args, dict):
        args = dumps(args)
    else:
        raise RecordProblem("wrong_type", f"the arguments of {where} are {type_name(args)}, expected an object")
    return {"id": optional_text(call.get("id"), f"the id of {where}"), "name": name, "arguments": args}


def _function_calls(value: Any, i: int) -> list[dict]:
    """The calls of a ShareGPT ``function_call`` turn: JSON text (or a value) of one call or a list."""
    calls = parse_json(value, f"the function_call of turn {i}") if isinstance(value, str) else value
    if isinstance(calls, dict):
        calls = [calls]
    if not isinstance(calls, list) or not calls:
        raise RecordProblem("wrong_type", f"the function_call of turn {i} must hold {{name, arguments}}")
    return [_call(c, f"call {k} of the function_call turn {i}") for k, c in enumerate(calls)]


def _add_calls(out: list[dict], calls: list[dict], weight: float | None) -> None:
    if out and out[-1]["role"] == "assistant":
        out[-1]["tool_calls"] = (out[-1]["tool_calls"] or []) + calls
        return
    out.append(message("assistant", None, tool_calls=calls, weight=weight))


def _name_tool_results(messages: list[dict]) -> None:
    """Give every call an id (its own, else :func:`call_id`), and each tool result the name and id of the
    call it answers (by id, else by position)."""
    calls: list[dict] = []
    k = 0
    for t, m in enumerate(messages):
        if m["role"] == "assistant":
            calls, k = m["tool_calls"] or [], 0
            for j, c in enumerate(calls):
                c["id"] = c["id"] if c["id"] is not None else call_id(t, j, c)
        elif m["role"] != "tool":
            calls, k = [], 0
        elif calls:
            by_id = [c for c in calls if m["tool_call_id"] is not None and c["id"] == m["tool_call_id"]]
            match = by_id[0] if by_id else calls[k] if k < len(calls) else None
            if match is not None:
                m["name"] = m["name"] if m["name"] is not None else match["name"]
                m["tool_call_id"] = m["tool_call_id"] if m["tool_call_id"] is not None else match["id"]
            k += 1


_ALNUM = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def call_id(turn: int, index: int, call: dict) -> str:
    """A deterministic 9-character alphanumeric id for a call that has none (turn, position, name, arguments):
    the same record gives the same ids on every run."""
    digest = hashlib.sha256(f"{turn}\0{index}\0{call['name']}\0{call['arguments']}".encode()).digest()
    n = int.from_bytes(digest[:8], "big")
    return "".join(_ALNUM[(n // 62**i) % 62] for i in range(9))
