"""Canonical records, as Arrow schemas.

Everything that enters a track is normalised once, at the edge, into one of two records:

``Document`` (pretraining track)
    id, text, source, url, license, meta (JSON string)

``Conversation`` (SFT track)
    id, messages: list<Message>, tools (JSON string), source, meta (JSON string)

    Message  = role, content, reasoning, tool_calls: list<ToolCall>, name, weight (float, null = default),
               tool_call_id (on a ``tool`` result: the id of the call it answers)
    ToolCall = id, name, arguments (JSON string)

Free-form parts (``meta``, ``tools``, tool-call ``arguments``) are stored as JSON strings so the schemas
stay fixed whatever the input carries.

Every record gets a stable id: its own ``id`` field when present, else
``<path relative to the input root>:<1-based line or row>`` (see :func:`record_id`).
"""

from __future__ import annotations

import pyarrow as pa

ROLES = ("system", "user", "assistant", "tool")

DOCUMENT = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("license", pa.string()),
        pa.field("meta", pa.string()),
    ]
)

TOOL_CALL = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("name", pa.string()),
        pa.field("arguments", pa.string()),
    ]
)

MESSAGE = pa.struct(
    [
        pa.field("role", pa.string(), nullable=False),
        pa.field("content", pa.large_string()),
        pa.field("reasoning", pa.large_string()),
        pa.field("tool_calls", pa.list_(TOOL_CALL)),
        pa.field("name", pa.string()),
        pa.field("weight", pa.float32()),
        pa.field("tool_call_id", pa.string()),
    ]
)

CONVERSATION = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("messages", pa.list_(MESSAGE), nullable=False),
        pa.field("tools", pa.string()),
        pa.field("source", pa.string(), nullable=False),
        pa.field("meta", pa.string()),
    ]
)


def record_id(own_id: object, source: str, loc: int) -> str:
    """The stable id of a record: its own non-empty ``id`` when it has one, else ``source:loc``."""
    if own_id is not None and own_id != "":
        return str(own_id)
    return f"{source}:{loc}"
