"""Raw preference records into one canonical :class:`Pair`, with a reject (file, line, reason) for every bad one.

The router decides a file's mapping once (``route/schema.py``, ``route/shapes.py``); this module reads each
record by it. The layouts taken:

- **TRL standard**: ``prompt``, ``chosen``, ``rejected`` strings (the completions are text, the prompt is
  tokenized as plain text);
- **TRL conversational**: the same three as lists of messages (``role``/``content``);
- **implicit prompt**: ``chosen`` and ``rejected`` whole conversations (or texts) and no prompt: the prompt is
  their longest common prefix, as TRL's ``extract_prompt`` takes it (whole messages; for texts, characters,
  a space before the split going to the completions);
- **LLaMA-Factory**: ``conversations`` (ShareGPT ``from``/``value`` turns) with ``chosen``/``rejected`` single
  turns; ``chosen_messages``/``rejected_messages`` whole conversations whose content may be typed parts;
- **KTO, unpaired**: ``prompt``/``completion`` or ``messages`` (the trailing assistant turns are the
  completion) with a boolean ``label`` (true: desirable);
- **rated pairs** (UltraFeedback): ``chosen-rating``/``rejected-rating`` (or ``score_chosen``/``score_rejected``)
  kept in the pair's ``meta`` as ``chosen_rating``/``rejected_rating``; their difference is the margin.

Messages are normalised by the SFT track's reader (:func:`tokenmill.sft.schemas_chat.chat_messages`: roles,
typed parts, reasoning, tool calls); a ``system`` column becomes a leading system message and ``tools`` the
JSON tool list, as in the SFT track.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenmill.base.accounting import Reject
from tokenmill.records import record_id
from tokenmill.sft.schemas_chat import chat_messages
from tokenmill.sft.schemas_common import cell, message, optional_text, tools_json
from tokenmill.sft.validate import RecordProblem, type_name

RATING_NAMES = {"chosen_rating": ("chosen-rating", "chosen_rating", "score_chosen", "chosen_score"),
                "rejected_rating": ("rejected-rating", "rejected_rating", "score_rejected", "rejected_score")}
COMPLETION_ROLES = ("assistant", "tool")  # what a completion may hold: the model's turns and its tools' results


@dataclass(frozen=True)
class Pair:
    """One preference record: a prompt and two completions (``rejected`` None: a KTO record, ``label`` set).

    ``prompt``, ``chosen`` and ``rejected`` are all canonical message lists (``form="chat"``) or all strings
    (``form="text"``, TRL's standard format).
    """

    id: str
    form: str  # "chat" | "text"
    prompt: Any
    chosen: Any
    rejected: Any = None
    label: bool | None = None  # KTO's: True = desirable completion
    tools: str | None = None
    meta: dict = field(default_factory=dict)

    @property
    def paired(self) -> bool:
        return self.rejected is not None

    @property
    def margin(self) -> float | None:
        """chosen rating - rejected rating, when both are given."""
        c, r = self.meta.get("chosen_rating"), self.meta.get("rejected_rating")
        return None if c is None or r is None else float(c) - float(r)


def read_pairs(rows: list[Any], locs: list[int], *, source: str, schema: dict) -> tuple[list[tuple[int, Pair]], list[Reject]]:
    """``(loc, Pair)`` for the good rows, a :class:`Reject` (reason, sentence, raw record) for each bad one."""
    kept, rejects = [], []
    for row, loc in zip(rows, locs):
        try:
            kept.append((loc, read_pair(row, loc, source=source, schema=schema)))
        except RecordProblem as problem:
            rejects.append(Reject(source, loc, problem.reason, problem.detail, raw=row))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            rejects.append(Reject(source, loc, "wrong_type", f"the record has an unexpected shape ({exc!r})", raw=row))
    return kept, rejects


def read_pair(row: Any, loc: int, *, source: str, schema: dict) -> Pair:
    """One raw record as a :class:`Pair`; raises :class:`RecordProblem` naming what is wrong and what to change."""
    if not isinstance(row, dict):
        raise RecordProblem("wrong_type", f"the record is {type_name(row)}, expected an object with named fields")
    if schema.get("style") == "kto":
        prompt, completion, label = _kto(row, schema)
        pair = _pair(prompt, completion, None)
    else:
        prompt = cell(row, schema["prompt"]) if schema.get("prompt") else None
        pair = _pair(prompt, cell(row, schema["chosen"]), cell(row, schema["rejected"]))
        label = None
    form, p, c, r = pair
    if form == "chat" and schema.get("system") and row.get(schema["system"]):
        p = [message("system", optional_text(row[schema["system"]], "the system field")), *p]
    tools = tools_json(row.get(schema["tools"])) if schema.get("tools") else None
    own_id = row.get(schema["id"]) if schema.get("id") else None
    return Pair(record_id(own_id, source, loc), form, p, c, r, label, tools, _ratings(row))


def _kto(row: dict, schema: dict) -> tuple[Any, Any, bool]:
    """(prompt, completion, label) of a KTO record; a record without a boolean label names what to add."""
    label_key = schema.get("label") or "label"
    label = row.get(label_key)
    if not isinstance(label, bool):
        got = "no" if label is None else f"a {type_name(label)}"
        raise RecordProblem("missing_label", f"the record has {got} {label_key!r} value; a KTO record needs a boolean "
                            f"{label_key!r} (true: a desirable completion, false: an undesirable one), or give "
                            "pairs with chosen/rejected instead")
    if schema.get("messages"):
        turns = _messages(cell(row, schema["messages"]), "messages")
        start = len(turns)
        while start > 0 and turns[start - 1]["role"] in COMPLETION_ROLES:
            start -= 1
        return turns[:start], turns[start:], label
    return cell(row, schema.get("prompt") or "prompt"), cell(row, schema.get("chosen") or "completion"), label


def _pair(prompt: Any, chosen: Any, rejected: Any) -> tuple[str, Any, Any, Any]:
    """(form, prompt, chosen, rejected) in one form: all messages or all text; the implicit prompt extracted."""
    texts = [v for v in (prompt, chosen, rejected) if v is not None]
    if all(isinstance(v, str) for v in texts):
        if prompt is None:
            prompt, chosen, rejected = extract_prompt(chosen, rejected)
        return "text", prompt, chosen, rejected
    chosen = _messages(chosen, "chosen", reply=True)
    rejected = None if rejected is None else _messages(rejected, "rejected", reply=True)
    if prompt is None:
        prompt, chosen, rejected = extract_prompt(chosen, rejected)
    else:
        prompt = _messages(prompt, "prompt", reply=False)
        chosen, rejected = _without_prompt(prompt, chosen), None if rejected is None else _without_prompt(prompt, rejected)
    for side, turns in (("chosen", chosen), ("rejected", rejected)):
        _check_completion(side, turns)
    return "chat", prompt, chosen, rejected


def _messages(value: Any, what: str, *, reply: bool = False) -> list[dict]:
    """Canonical messages from a string (a user prompt, or an assistant reply), one turn dict or a turn list."""
    if isinstance(value, str):
        return [message("assistant" if reply else "user", value)]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        raise RecordProblem("wrong_type", f"the {what} field is {type_name(value)}, expected a string or a list of "
                            "messages")
    first = value[0] if isinstance(value[0], dict) else {}
    keys = ("from", "value") if "from" in first else ("role", "content")
    return chat_messages(value, role_key=keys[0], content_key=keys[1])


def extract_prompt(chosen: Any, rejected: Any) -> tuple[Any, Any, Any]:
    """TRL's ``extract_prompt``: the longest common prefix of ``chosen`` and ``rejected`` (messages, or characters
    with a space before the split moved to the completions) is the prompt; the rests are the completions."""
    if rejected is None:
        raise RecordProblem("missing_field", "no prompt and no rejected side to find it from")
    if chosen == rejected:
        raise RecordProblem("identical_completions", "chosen and rejected are the same conversation: nothing to prefer")
    idx = 0
    while idx < min(len(chosen), len(rejected)) and chosen[idx] == rejected[idx]:
        idx += 1
    if isinstance(chosen, str) and 0 < idx < min(len(chosen), len(rejected)) and chosen[idx - 1] == " ":
        idx -= 1
    return chosen[:idx], chosen[idx:], rejected[idx:]


def _without_prompt(prompt: list[dict], turns: list[dict]) -> list[dict]:
    """A completion given as the whole conversation (prompt repeated at its start) without the prompt."""
    if len(turns) > len(prompt) and turns[:len(prompt)] == prompt:
        return turns[len(prompt):]
    return turns


def _check_completion(side: str, turns: list[dict] | None) -> None:
    """A completion holds only what the model emits (and its tools' results); a user or system turn in it means
    the two sides do not share one prompt."""
    if turns is None:
        return
    odd = next((i for i, m in enumerate(turns) if m["role"] not in COMPLETION_ROLES), None)
    if odd is not None:
        raise RecordProblem("prompt_differs", f"the {side} side has a {turns[odd]['role']} turn after the shared prompt "
                            f"(its completion's turn {odd}): chosen and rejected must continue one prompt; give the "
                            "prompt in a 'prompt' field, or conversations that differ only in the last reply")
    if not turns:
        raise RecordProblem("empty_completion", f"the {side} side has no reply after the prompt")


def _ratings(row: dict) -> dict:
    """The pair's ratings (UltraFeedback's ``chosen-rating`` ...), as ``chosen_rating``/``rejected_rating``."""
    out = {}
    for key, names in RATING_NAMES.items():
        value = next((row[n] for n in names if n in row and row[n] is not None), None)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RecordProblem("wrong_type", f"the {key.replace('_', ' ')} is {type_name(value)}, expected a number")
        out[key] = value
    return out
