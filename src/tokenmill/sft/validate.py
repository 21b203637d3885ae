"""Strict checks on one canonical conversation dict (the shape of ``records.CONVERSATION``).

The first problem found is reported as a stable reason key and a sentence naming the message index
(indices count the messages of the normalised conversation, system prompt included):

    missing_field             a required key or value is absent (id, messages, role, user/system/tool content)
    wrong_type                a value of the wrong type (content that is a number, arguments that are not JSON)
    unknown_role              a role outside system/user/assistant/tool
    system_not_first          a system message after index 0
    consecutive_roles         two user or two assistant messages in a row (``allow_consecutive=True`` accepts it)
    empty_assistant           an assistant message with empty or null content and no tool calls
    no_assistant              nothing to train on
    no_user                   assistant replies to no user turn at all
    tool_result_without_call  a tool result not preceded by an assistant tool call (or answering an unknown id)
    empty_conversation        no messages
    unsupported_content_part  a non-text content part (image, audio, ...) in the input
"""

from __future__ import annotations

import json
import math
from typing import Any

from tokenmill.records import ROLES

REASONS = (
    "missing_field",
    "wrong_type",
    "unknown_role",
    "system_not_first",
    "consecutive_roles",
    "empty_assistant",
    "no_assistant",
    "no_user",
    "tool_result_without_call",
    "empty_conversation",
    "unsupported_content_part",
)


class RecordProblem(Exception):
    """One record that cannot become a conversation: a reason key from ``REASONS`` and a sentence."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def validate_conversation(conv: dict, *, allow_consecutive: bool = False) -> str | None:
    """The reason key of the first problem in ``conv``, or None when it is a valid conversation."""
    problem = explain_conversation(conv, allow_consecutive=allow_consecutive)
    return None if problem is None else problem[0]


def explain_conversation(conv: dict, *, allow_consecutive: bool = False) -> tuple[str, str] | None:
    """``(reason, detail)`` of the first problem in ``conv``, or None when it is valid."""
    try:
        check_conversation(conv, allow_consecutive=allow_consecutive)
    except RecordProblem as problem:
        return problem.reason, problem.detail
    return None


def check_conversation(conv: dict, *, allow_consecutive: bool = False) -> None:
    """Raise :class:`RecordProblem` for the first problem in ``conv``."""
    messages = _check_header(conv)
    for i, message in enumerate(messages):
        _check_message(message, i)
    _check_order(messages, allow_consecutive=allow_consecutive)
    roles = {m["role"] for m in messages}
    if "assistant" not in roles:
        raise RecordProblem("no_assistant", "the conversation has no assistant message, so nothing would be trained")
    if "user" not in roles:
        raise RecordProblem("no_user", "the conversation has no user message: the assistant answers nobody")


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check_header(conv: Any) -> list:
    if not isinstance(conv, dict):
        raise RecordProblem("wrong_type", f"a conversation must be a dict, got {type_name(conv)}")
    for key in ("id", "source", "messages"):
        if conv.get(key) is None or conv.get(key) == "":
            raise RecordProblem("missing_field", f"the conversation has no {key!r}")
    for key in ("id", "source"):
        _want_str(conv[key], f"the conversation's {key!r}")
    for key in ("tools", "meta"):
        _want_str(conv.get(key), f"the conversation's {key!r}", nullable=True)
    if conv.get("tools") is not None and not isinstance(_json_or_none(conv["tools"]), list):
        raise RecordProblem("wrong_type", "the conversation's 'tools' is not a JSON list of tool specs")
    messages = conv["messages"]
    if not isinstance(messages, list):
        raise RecordProblem("wrong_type", f"'messages' must be a list, got {type_name(messages)}")
    if not messages:
        raise RecordProblem("empty_conversation", "the conversation has no messages")
    return messages


def _check_message(m: Any, i: int) -> None:
    if not isinstance(m, dict):
        raise RecordProblem("wrong_type", f"message {i} must be a dict, got {type_name(m)}")
    role = m.get("role")
    if role is None:
        raise RecordProblem("missing_field", f"message {i} has no role")
    _want_str(role, f"the role of message {i}")
    if role not in ROLES:
        raise RecordProblem("unknown_role", f"message {i} has role {role!r}; expected one of {', '.join(ROLES)}")
    for key in ("content", "reasoning", "name", "tool_call_id"):
        value = m.get(key)
        if value is not None and not isinstance(value, str):  # the message is formatted only for a problem
            _want_str(value, f"the {key} of message {i} ({role})")
    _check_weight(m.get("weight"), i)
    calls = _check_tool_calls(m.get("tool_calls"), i, role)
    content = m.get("content")
    if role == "assistant" and not calls and (content is None or not content.strip()):
        raise RecordProblem("empty_assistant", f"assistant message {i} has empty content and no tool calls")
    if role != "assistant" and content is None:
        raise RecordProblem("missing_field", f"message {i} ({role}) has no content")


MAX_WEIGHT = 1e30


def _check_weight(weight: Any, i: int) -> None:
    if weight is None:
        return
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
        raise RecordProblem("wrong_type", f"message {i} has weight {weight!r}; expected a finite number >= 0")
    if weight > MAX_WEIGHT:  # shards store weights as float32
        raise RecordProblem("wrong_type", f"message {i} has weight {weight!r}; expected at most {MAX_WEIGHT:g}")


def _check_tool_calls(calls: Any, i: int, role: str) -> list:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise RecordProblem("wrong_type", f"the tool_calls of message {i} must be a list, got {type_name(calls)}")
    if calls and role != "assistant":
        raise RecordProblem("wrong_type", f"message {i} ({role}) has tool calls; only assistant messages make them")
    for k, call in enumerate(calls):
        where = f"tool call {k} of message {i}"
        if not isinstance(call, dict):
            raise RecordProblem("wrong_type", f"{where} must be a dict, got {type_name(call)}")
        if not call.get("name"):
            raise RecordProblem("missing_field", f"{where} has no function name")
        _want_str(call["name"], f"the name of {where}")
        _want_str(call.get("id"), f"the id of {where}", nullable=True)
        _want_str(call.get("arguments"), f"the arguments of {where}")
        if not isinstance(_json_or_none(call["arguments"]), dict):
            detail = f"the arguments of {where} are not a JSON object: {call['arguments'][:80]!r}"
            raise RecordProblem("wrong_type", detail)
    return calls


def _check_order(messages: list[dict], *, allow_consecutive: bool) -> None:
    prev = None
    open_calls: list[dict] | None = None  # tool calls of the last assistant message still being answered
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "system" and i > 0:
            raise RecordProblem("system_not_first", f"system message at index {i}; a system message must come first")
        if role == "tool":
            _check_tool_result(m, i, open_calls)
        elif role == prev and role in ("user", "assistant") and not allow_consecutive:
            raise RecordProblem(
                "consecutive_roles",
                f"two consecutive {role} messages at index {i - 1} and {i}; merge them or allow consecutive roles",
            )
        if role == "assistant":
            open_calls = m.get("tool_calls") or None
        elif role != "tool":
            open_calls = None
        prev = role


def _check_tool_result(m: dict, i: int, open_calls: list[dict] | None) -> None:
    if not open_calls:
        raise RecordProblem(
            "tool_result_without_call", f"tool result at index {i} does not follow an assistant message with tool calls"
        )
    wanted = m.get("tool_call_id")
    ids = {c_id for c in open_calls if (c_id := c.get("id")) is not None}
    if wanted is not None and ids and wanted not in ids:
        raise RecordProblem(
            "tool_result_without_call",
            f"tool result at index {i} answers call id {wanted!r}, which the assistant did not make ({sorted(ids)})",
        )


def _want_str(value: Any, what: str, *, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    if not isinstance(value, str):
        raise RecordProblem("wrong_type", f"{what} is {type_name(value)}, expected a string")


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
