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
from typing import Any

import pyarrow as pa

from tokenmill.base.accounting import Reject
from tokenmill.errors import InputError
from tokenmill.io.base import RawBatch
from tokenmill.records import CONVERSATION, record_id
from tokenmill.route.spec import Spec, parse_schema
from tokenmill.sft.schemas_chat import chat_messages
from tokenmill.sft.schemas_common import cell, message, optional_text, tools_json
from tokenmill.sft.schemas_pairs import alpaca_messages, pair_messages
from tokenmill.sft.validate import RecordProblem, explain_conversation, type_name


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


def _style_messages(row: dict, spec: Spec) -> list[dict]:
    cols = spec.columns
    if spec.style == "prompt_response":
        return pair_messages(row, prompt=spec.column("prompt"), response=spec.column("response"))
    if spec.style == "alpaca":
        return alpaca_messages(
            row, instruction=spec.column("instruction"), output=spec.column("output"), query=cols["query"],
            history=cols["history"]
        )
    messages = chat_messages(cell(row, spec.column("messages")), **spec.turn_args)
    reply = cols["response"]
    if reply:
        messages.extend(_reply(cell(row, reply), spec))
    return messages


def _reply(value: Any, spec: Spec) -> list[dict]:
    """The final reply held in its own column (e.g. the ``chosen`` side): text, one turn, or a list of turns."""
    if isinstance(value, str) or value is None:
        return [message("assistant", value)]
    return chat_messages(value if isinstance(value, list) else [value], **spec.turn_args)


def _attach_reasoning(messages: list[dict], value: Any, column: str) -> None:
    reasoning = optional_text(value, f"the {column!r} field")
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if reasoning is not None and last is not None:
        last["reasoning"] = reasoning


def _meta(row: dict, spec: Spec) -> str | None:
    if spec.meta is not None:
        columns = spec.meta
    else:
        used = spec.used  # a set built by the property: once per record, not once per column
        columns = [k for k in row if k not in used]
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


