"""Single-turn column layouts into canonical messages: prompt/response pairs and Alpaca records.

Alpaca: the user turn is the instruction, then the input on the next line when it is not empty (as
LLaMA-Factory renders it); ``history`` is a list of ``[user, assistant]`` pairs that come first.
A null response or output is kept as empty assistant content, which validation rejects as ``empty_assistant``.
"""

from __future__ import annotations

from typing import Any

from tokenmill.sft.schemas_common import cell, message, optional_text, text
from tokenmill.sft.validate import RecordProblem, type_name


def pair_messages(row: dict, *, prompt: str, response: str) -> list[dict]:
    """One user turn from column ``prompt``, one assistant turn from column ``response``."""
    return [
        message("user", text(cell(row, prompt), f"the {prompt!r} field")),
        message("assistant", optional_text(cell(row, response), f"the {response!r} field")),
    ]


def alpaca_messages(row: dict, *, instruction: str, output: str, query: str | None, history: str | None) -> list[dict]:
    """History pairs, then instruction + ``query`` (Alpaca's ``input`` column) as the user turn, then the output."""
    parts = [text(cell(row, instruction), f"the {instruction!r} field")]
    if query is not None:
        parts.append(optional_text(row.get(query), f"the {query!r} field") or "")
    user = "\n".join(p for p in parts if p)
    reply = optional_text(cell(row, output), f"the {output!r} field")
    past = _history(row.get(history), history) if history else []
    return [*past, message("user", user), message("assistant", reply)]


def _history(value: Any, column: str) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        detail = f"the {column!r} field is {type_name(value)}, expected a list of [user, assistant] pairs"
        raise RecordProblem("wrong_type", detail)
    out = []
    for k, pair in enumerate(value):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise RecordProblem("wrong_type", f"history entry {k} is not a [user, assistant] pair")
        out.append(message("user", text(pair[0], f"the user turn of history entry {k}")))
        out.append(message("assistant", optional_text(pair[1], f"the assistant turn of history entry {k}")))
    return out
