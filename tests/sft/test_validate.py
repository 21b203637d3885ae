"""Every rejection reason, raised from raw records through normalisation and from canonical dicts directly."""

from __future__ import annotations

import pytest

from tokenmill.base.accounting import Reject
from tokenmill.sft.normalize import normalize_rows
from tokenmill.sft.schemas_common import message
from tokenmill.sft.validate import REASONS, explain_conversation, validate_conversation

MESSAGES = {
    "record": "Conversation",
    "style": "messages",
    "messages": "messages",
    "role_key": "role",
    "content_key": "content",
}
U, A = {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

CASES = [
    ("missing_field", {"other": []}, "no 'messages' field"),
    ("missing_field", {"messages": [{"content": "hi"}, A]}, "turn 0 has no 'role'"),
    ("missing_field", {"messages": [{"role": "user"}, A]}, "message 0 (user) has no content"),
    (
        "missing_field",
        {"messages": [U, {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]},
        "function name",
    ),
    ("wrong_type", {"messages": [{"role": "user", "content": 42}, A]}, "content of turn 0 is int"),
    ("wrong_type", {"messages": "hi"}, "messages field is str"),
    (
        "wrong_type",
        {"messages": [U, {"role": "assistant", "content": "x", "weight": "heavy"}]},
        "turn 1 has weight 'heavy'",
    ),
    (
        "wrong_type",
        {"messages": [U, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]},
        "not valid JSON",
    ),
    (
        "wrong_type",
        {"messages": [U, {"role": "assistant", "content": "x", "tool_calls": {"name": "f"}}]},
        "tool_calls of turn 1 is dict",
    ),
    ("unknown_role", {"messages": [{"role": "narrator", "content": "x"}, A]}, "turn 0 has role 'narrator'"),
    ("system_not_first", {"messages": [U, {"role": "system", "content": "s"}, A]}, "system message at index 1"),
    (
        "consecutive_roles",
        {"messages": [{"role": "system", "content": "s"}, U, A, U, U, A]},
        "two consecutive user messages at index 3 and 4",
    ),
    ("consecutive_roles", {"messages": [U, A, A]}, "two consecutive assistant messages at index 1 and 2"),
    (
        "empty_assistant",
        {"messages": [U, {"role": "assistant", "content": "  \n"}]},
        "assistant message 1 has empty content",
    ),
    ("empty_assistant", {"messages": [U, {"role": "assistant", "content": None}]}, "assistant message 1"),
    ("empty_assistant", {"messages": [U, {"role": "assistant", "content": "<think>all thought</think>"}]}, "message 1"),
    ("no_assistant", {"messages": [U]}, "no assistant message"),
    ("no_user", {"messages": [{"role": "system", "content": "s"}, A]}, "no user message"),
    ("tool_result_without_call", {"messages": [U, {"role": "tool", "content": "42"}, A]}, "tool result at index 1"),
    (
        "tool_result_without_call",
        {
            "messages": [
                U,
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "c9", "content": "1"},
                A,
            ]
        },
        "call id 'c9'",
    ),
    (
        "tool_result_without_call",
        {
            "messages": [
                U,
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "content": "1"},
                A,
                {"role": "tool", "content": "2"},
            ]
        },
        "index 4",
    ),
    ("empty_conversation", {"messages": []}, "no messages"),
    (
        "unsupported_content_part",
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, A]},
        "type 'image_url'",
    ),
]


@pytest.mark.parametrize("reason, row, detail", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_reject_reason_and_detail(reason, row, detail):
    kept, rejects = normalize_rows([row], [9], source="chats.jsonl", schema=MESSAGES)
    assert kept == []
    assert rejects == [Reject("chats.jsonl", 9, reason, rejects[0].detail, raw=row)]
    assert detail in rejects[0].detail


def test_every_reason_is_exercised():
    assert {c[0] for c in CASES} == set(REASONS)


def test_allow_consecutive():
    row = {"messages": [U, U, A, A]}
    kept, rejects = normalize_rows([row], [1], source="s", schema=MESSAGES, allow_consecutive=True)
    assert len(kept) == 1 and rejects == []


def test_kept_and_rejected_are_accounted_for():
    rows = [
        {"messages": [U, A]},
        17,
        None,
        {"messages": [U, A, {"role": "assistant", "content": 3.5}]},
        {"messages": [U, A]},
    ]
    kept, rejects = normalize_rows(rows, [1, 2, 3, 4, 5], source="s", schema=MESSAGES)
    assert [c["id"] for c in kept] == ["s:1", "s:5"]
    assert [(r.loc, r.reason) for r in rejects] == [(2, "wrong_type"), (3, "wrong_type"), (4, "wrong_type")]


def test_tool_round_trip_is_valid():
    row = {
        "messages": [
            U,
            {"role": "assistant", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "1"},
            A,
        ]
    }
    kept, rejects = normalize_rows([row], [1], source="s", schema=MESSAGES)
    assert rejects == [] and kept[0]["messages"][2]["name"] == "f"


def canonical(*messages: dict) -> dict:
    return {"id": "x", "source": "s", "messages": list(messages), "tools": None, "meta": None}


def test_validate_canonical_dicts_directly():
    good = canonical(message("user", "q"), message("assistant", "a"))
    assert validate_conversation(good) is None and explain_conversation(good) is None
    assert validate_conversation({**good, "id": ""}) == "missing_field"
    assert validate_conversation({**good, "tools": "{not json"}) == "wrong_type"
    assert validate_conversation(canonical(message("user", "q"), message("bot", "a"))) == "unknown_role"
    assert (
        validate_conversation(canonical(message("user", "q"), {**message("assistant", "a"), "weight": -1.0}))
        == "wrong_type"
    )
    assert validate_conversation("not a dict") == "wrong_type"
    bad_call = message("user", "q", tool_calls=[{"id": None, "name": "f", "arguments": "{}"}])
    assert explain_conversation(canonical(bad_call, message("assistant", "a"))) == (
        "wrong_type",
        "message 0 (user) has tool calls; only assistant messages make them",
    )
    pair = canonical(message("user", "q"), message("user", "q2"), message("assistant", "a"))
    assert validate_conversation(pair) == "consecutive_roles"
    assert validate_conversation(pair, allow_consecutive=True) is None
