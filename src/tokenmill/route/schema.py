"""Schema mappings: how an input's fields map onto tokenmill's canonical records.

A mapping is a plain dict. Field values are top-level column names, or ``None`` when absent.

Document (``record: "Document"``, kind ``pretrain``)::

    text      column holding the document text
    id        column with the record's own id, or None (the reader then uses ``source:loc``)
    url       column, or dotted path one level into a dict column (``"metadata.url"``), or None
    license   column or dotted path, or None
    meta      list of the remaining columns (stored as the JSON ``meta`` string)

Conversation (``record: "Conversation"``, kind ``sft``); ``style`` says which keys follow:

    style "prompt_response" | "question_answer" | "problem_solution"   one user turn, one assistant turn
        prompt, response      columns (strings); the name of the style only records the input's wording
    style "alpaca"
        instruction, output   columns; input (or None) is appended to the instruction after a blank line;
        history (or None)     list of [user, assistant] pairs that come before the instruction
    style "sharegpt" | "messages"   one column holds the list of turns
        messages              the column
        response              column of the final reply's turns, or absent (TRL's conversational
                              prompt/completion: ``prompt`` and ``completion`` both lists of messages)
        role_key, content_key keys inside each turn dict (``from``/``value``, ``role``/``content``, ...)
        roles                 sorted role values seen in the sample (e.g. ``gpt``, ``human``, ``observation``)
        content_parts         True when content is a list of typed parts ``{"type", "text"|"value"}``
        reasoning_key         per-turn key with the reasoning trace, or None
        weight_key            per-turn loss-weight key (``loss_weight``, ``weight``), or None
    style "rendered_text"     conversations already rendered into one string per record
        text                  the column; markers: marker families found (``chatml``, ``alpaca``, ...)
    every Conversation mapping also has:
        system    top-level system-prompt column or None
        tools     column with the tool definitions (JSON string or list) or None
        reasoning top-level column with the assistant's reasoning trace or None
        id        column or None
        meta      list of the remaining columns

Preference (``record: None``, kind ``preference``): ``chosen``, ``rejected``, ``prompt`` (column or None),
``id``, ``meta``. The SFT track refuses it, naming these columns.

Unknown (``record: None``): ``columns``, the fields seen.
"""

from __future__ import annotations

from typing import Any

from tokenmill.route.content import is_question_like
from tokenmill.route.messages import MessageLayout, split_turns
from tokenmill.route.profile import (
    DOCUMENT_WORDS,
    HISTORY_NAMES,
    ID_NAMES,
    LICENSE_NAMES,
    PROMPT_WORDS,
    REASONING_WORDS,
    RESPONSE_WORDS,
    SYSTEM_NAMES,
    TOOLS_WORDS,
    URL_NAMES,
    Column,
    first_named,
    has_word,
    name_tokens,
    nested_field,
    string_columns,
)

PAIR_STYLES = ("prompt_response", "question_answer", "problem_solution")


def preference_schema(cols: dict[str, Column]) -> dict | None:
    chosen = next((c for c in cols if "chosen" in name_tokens(c)), None)
    rejected = next((c for c in cols if "rejected" in name_tokens(c)), None)
    if chosen is None or rejected is None:
        return None
    prompt = first_named(cols, ("prompt", "conversations", "messages", "question", "instruction", "input"))
    schema = {"record": None, "style": "preference", "chosen": chosen, "rejected": rejected, "prompt": prompt}
    return _finish(schema, cols)


def messages_schema(layout: MessageLayout, cols: dict[str, Column], rows: list[dict[str, Any]] | None = None) -> dict:
    sharegpt = layout.role_key == "from" and layout.content_key == "value"
    prompt, completion = _turn_pair(layout, rows or [], cols)
    schema = {
        "record": "Conversation",
        "style": "sharegpt" if sharegpt else "messages",
        "messages": prompt,
        "role_key": layout.role_key,
        "content_key": layout.content_key,
        "roles": sorted(layout.roles),
        "content_parts": layout.content_parts,
        "reasoning_key": layout.reasoning_key,
        "weight_key": layout.weight_key,
    }
    if completion is not None:
        schema["response"] = completion
    return _finish(_conversation_extras(schema, cols), cols)


def _turn_pair(layout: MessageLayout, rows: list[dict[str, Any]], cols: dict[str, Column]) -> tuple[str, str | None]:
    """(prompt turns column, completion turns column) for TRL's conversational prompt/completion layout
    (``prompt`` and ``completion`` both lists of messages); (the layout's column, None) otherwise."""
    def turn_lists(name: str) -> bool:
        values = [r.get(name) for r in rows if r.get(name) is not None]
        return bool(values) and all(isinstance(v, list) and all(isinstance(t, dict) and layout.role_key in t
                                                                  for t in v) for v in values)

    lists = [c.name for c in cols.values() if c.lists and turn_lists(c.name)]
    prompt = next((c for w in PROMPT_WORDS for c in lists if c.lower() == w), None)
    completion = next((c for c in lists if c != prompt and has_word(c, RESPONSE_WORDS)), None)
    if prompt is None or completion is None:
        return layout.column, None
    return prompt, completion


def alpaca_schema(cols: dict[str, Column]) -> dict | None:
    instruction = first_named(cols, ("instruction", "instructions"), kind="str")
    output = first_named(cols, ("output", "response", "answer", "completion"), kind="str")
    if instruction is None or output is None:
        return None
    schema = {
        "record": "Conversation",
        "style": "alpaca",
        "instruction": instruction,
        "input": first_named(cols, ("input", "context"), kind="str"),
        "output": output,
        "history": first_named(cols, HISTORY_NAMES, kind="list"),
    }
    return _finish(_conversation_extras(schema, cols), cols)


def pair_schema(cols: dict[str, Column], n_rows: int) -> dict | None:
    """A prompt-like and a response-like string column, matched by the words in their names."""
    texts = [c for c in string_columns(cols, n_rows) if not has_word(c.name, REASONING_WORDS)]
    prompt = _prompt_column(texts)
    answers = [c for c in texts if c is not prompt and has_word(c.name, RESPONSE_WORDS)]
    if prompt is None or not answers:
        return None
    return _pair(prompt.name, max(answers, key=lambda c: c.mean_len).name, cols)


def _prompt_column(texts: list[Column]) -> Column | None:
    """The prompt-like column: an exact name first (``query`` over ``original_question``), then a word match."""
    for match in (lambda c, w: c.name.lower() == w, lambda c, w: w in name_tokens(c.name)):
        found = next((c for w in PROMPT_WORDS for c in texts if match(c, w)), None)
        if found is not None:
            return found
    return None


def content_pair_schema(rows: list[dict[str, Any]], cols: dict[str, Column]) -> dict | None:
    """Unknown names: a column of short questions/requests beside a longer column that answers them."""
    texts = string_columns(cols, len(rows), min_share=0.8)
    texts = [c for c in texts if not _is_key_column(c.name) and not has_word(c.name, DOCUMENT_WORDS)]
    for q in texts:
        values = [v for r in rows if isinstance(v := r.get(q.name), str)]
        if sum(map(is_question_like, values)) < 0.6 * len(values):
            continue
        answers = [c for c in texts if c is not q and c.mean_len >= 0.5 * q.mean_len]
        if answers:
            return _pair(q.name, max(answers, key=lambda c: c.mean_len).name, cols)
    return None


def document_schema(cols: dict[str, Column], n_rows: int) -> tuple[dict | None, bool]:
    """(mapping, named): the text column by name, else the longest free-text column by content."""
    texts = string_columns(cols, n_rows)
    named = [c for c in texts if has_word(c.name, DOCUMENT_WORDS)]
    if named:
        text = max(named, key=lambda c: c.mean_len)
    else:
        long = [c for c in texts if c.mean_len >= 200 and not _is_key_column(c.name)]
        if not long:
            return None, False
        text = max(long, key=lambda c: c.mean_len)
    return document_mapping(text.name, cols), bool(named)


# the columns of tokenmill's own documents files (`tokenmill curate`'s documents/, `synth rephrase`'s output)
CURATED_COLUMNS = ("id", "text", "source", "url", "license", "meta", "loc")


def document_mapping(text: str, cols: dict[str, Column]) -> dict:
    if tuple(cols) == CURATED_COLUMNS and text == "text":
        return curated_mapping()
    rest = {k: v for k, v in cols.items() if k != text}
    schema = {
        "record": "Document",
        "text": text,
        "url": first_named(rest, URL_NAMES, kind="str") or nested_field(rest, URL_NAMES),
        "license": first_named(rest, LICENSE_NAMES) or nested_field(rest, LICENSE_NAMES),
    }
    return _finish(schema, cols)


def curated_mapping() -> dict:
    """A documents file tokenmill wrote: each document keeps the ``source`` it came from (provenance through
    curation into the shards) and its ``meta`` JSON as it is."""
    return {"record": "Document", "text": "text", "url": "url", "license": "license", "id": "id", "source": "source",
            "meta_json": "meta", "meta": []}


def rendered_text_schema(text: str, markers: list[str], cols: dict[str, Column]) -> dict:
    schema = {"record": "Conversation", "style": "rendered_text", "text": text, "markers": markers}
    return _finish(_conversation_extras(schema, cols), cols)


def record_texts(row: dict[str, Any], schema: dict) -> tuple[str, str] | None:
    """(prompt, response) text of one record under a Conversation mapping; None when it does not fit."""
    style = schema["style"]
    if style in ("sharegpt", "messages"):
        turns = row.get(schema["messages"])
        reply = row.get(schema["response"]) if schema.get("response") else None
        if isinstance(turns, list) and isinstance(reply, list):  # conversational prompt/completion
            turns = turns + reply
        return split_turns(turns, _layout_of(schema)) if isinstance(turns, list) else None
    if style == "alpaca":
        prompt = [row.get(schema["instruction"]), row.get(schema["input"]) if schema["input"] else None]
        response = row.get(schema["output"])
    else:
        prompt, response = [row.get(schema["prompt"])], row.get(schema["response"])
    if not isinstance(response, str):
        return None
    return "\n".join(p for p in prompt if isinstance(p, str)), response


def _layout_of(schema: dict) -> MessageLayout:
    return MessageLayout(schema["messages"], schema["role_key"], schema["content_key"])


def _pair(prompt: str, response: str, cols: dict[str, Column]) -> dict:
    words = name_tokens(prompt)
    style = "question_answer" if "question" in words else "problem_solution" if "problem" in words else None
    schema = {"record": "Conversation", "style": style or "prompt_response", "prompt": prompt, "response": response}
    return _finish(_conversation_extras(schema, cols), cols)


def _conversation_extras(schema: dict, cols: dict[str, Column]) -> dict:
    used = set(_used(schema))
    free = {k: v for k, v in cols.items() if k not in used}
    schema["system"] = first_named(free, SYSTEM_NAMES, kind="str")
    schema["tools"] = next((c for c in free if name_tokens(c) & TOOLS_WORDS), None)
    schema["reasoning"] = next((c for c in free if has_word(c, REASONING_WORDS)), None)
    return schema


def _finish(schema: dict, cols: dict[str, Column]) -> dict:
    used = set(_used(schema))
    schema["id"] = found = first_named({k: v for k, v in cols.items() if k not in used}, ID_NAMES)
    if found is not None:
        used.add(found)
    schema["meta"] = [c for c in cols if c not in used]
    return schema


def _used(schema: dict) -> list[str]:
    skip = {
        "record",
        "style",
        "role_key",
        "content_key",
        "roles",
        "content_parts",
        "reasoning_key",
        "weight_key",
        "markers",
        "meta",
    }
    return [v for k, v in schema.items() if k not in skip and isinstance(v, str)]


def _is_key_column(name: str) -> bool:
    return str(name).lower() in ID_NAMES or str(name).lower() in URL_NAMES
