"""Where each message's text lies in the render, taken from the renderer itself: one render with sentinels.

Every text field of every message (content, reasoning, name, tool-call names and argument strings) is wrapped
in a pair of sentinels unique to its message, the conversation is rendered once, and the sentinels are cut out
again: what remains is the plain render, and where each sentinel stood is where that message's text begins or
ends. Nothing is located by searching the output, so a one-letter content cannot match inside the template's
``<|im_start|>``, and a content equal to a control string stays a span of content.

A sentinel is two characters from Unicode's private-use planes 15 and 16: ``U+F0000`` (start) or ``U+F0001``
(end), then ``U+100000 + k`` for field ``k`` (``2 * i`` for message ``i``'s texts, ``2 * i + 1`` for its
reasoning). No template writes them, no tokenizer treats them as control
tokens, and a conversation that holds one itself is refused (``sentinel_collision``) rather than guessed at.

A sentinel must not change what the template renders. So it goes inside the text's leading and trailing
whitespace (``trim`` and ``strip`` see the same whitespace), and a text holding ``<think>``/``</think>`` tags is
marked piece by piece between the tags (templates split a reasoning block off at ``</think>`` and test
``startswith('<think>')``). Calibration checks on probe conversations that the template renders the marked
conversation, sentinels cut, exactly as the plain one; a template for which that fails is rendered a second time
in plain and the two compared for every conversation (see :func:`tokenmill.sft.masks.calibrate`).

Cost: the marking and the cut are one pass over the conversation's text each; the render is the only render.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from tokenmill.errors import TemplateError

START, END = "\U000f0000", "\U000f0001"
_INDEX_BASE, _INDEX_MAX = 0x100000, 0xFFFD  # field k -> chr(_INDEX_BASE + k)
_SENTINEL = re.compile("[\U000f0000\U000f0001][\U00100000-\U0010fffd]")
# a sentinel as Python's repr writes it: a template that passes a dict through ``|string`` (InternLM2's tool-call
# arguments) renders ``str(dict)``, whose strings escape the private-use characters
_ESCAPED = r"\\U000f000[01]\\U0010[0-9a-f]{4}"
_SPLIT = re.compile(f"({_SENTINEL.pattern})")
_SPLIT_ESCAPED = re.compile(f"({_SENTINEL.pattern}|{_ESCAPED})")  # slower: only for a render that holds an escape
_RESERVED = re.compile("[\U000f0000\U000f0001\U00100000-\U0010fffd]")
_THINK_TAG = re.compile(r"(</?think>)")


def start_of(k: int) -> str:
    return START + chr(_INDEX_BASE + k)


def end_of(k: int) -> str:
    return END + chr(_INDEX_BASE + k)


def texts_of(i: int) -> int:
    """Field of message ``i``'s content, name and tool calls."""
    return 2 * i


def reasoning_of(i: int) -> int:
    """Field of message ``i``'s reasoning."""
    return 2 * i + 1


def mark_text(text: str, i: int) -> str:
    """``text`` with field ``i``'s sentinels around each non-blank piece between ``<think>`` tags (around the
    whole text when it holds only tags), inside its leading and trailing whitespace."""
    if "<think>" not in text and "</think>" not in text:
        return _mark_piece(text, i)
    pieces = _THINK_TAG.split(text)
    if all(p in ("<think>", "</think>") or not p.strip() for p in pieces):
        return _mark_piece(text, i)  # tags only: one span around them
    return "".join(p if p in ("<think>", "</think>") else _mark_piece(p, i) for p in pieces)


def _mark_piece(piece: str, i: int) -> str:
    core = piece.strip()
    if not core:
        return piece
    lead = len(piece) - len(piece.lstrip())
    return f"{piece[:lead]}{start_of(i)}{core}{end_of(i)}{piece[lead + len(core):]}"


def _mark_value(value: Any, i: int) -> Any:
    """Strings inside tool-call arguments (keys and values) marked; numbers, booleans and None as they are."""
    if isinstance(value, str):
        return mark_text(value, i)
    if isinstance(value, dict):
        return {(mark_text(k, i) if isinstance(k, str) else k): _mark_value(v, i) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_value(v, i) for v in value]
    return value


_MARKED_KEYS = ("content", "reasoning_content", "thinking", "name")


def mark_messages(messages: list[dict], *, record_id: str = "?") -> list[dict]:
    """Copies of ``messages`` (HF form) with every text field marked by its message's sentinels.

    Tool-call ids are left as they are (templates check their length). Raises :class:`TemplateError`
    (``sentinel_collision``) when the conversation itself holds a reserved character.
    """
    if 2 * len(messages) > _INDEX_MAX:
        raise TemplateError(f"record {record_id}: {len(messages)} messages, over the {_INDEX_MAX // 2} a "
                            "conversation may have", reason="too_many_messages")
    out = []
    for i, m in enumerate(messages):
        marked = dict(m)
        for key in _MARKED_KEYS:
            if isinstance(m.get(key), str):
                # isascii: a flag of the string, no scan; the escape: a sentinel as a repr writes it
                if (not m[key].isascii() and _RESERVED.search(m[key])) or "\\U000f000" in m[key]:
                    _refuse_reserved(m[key], record_id, i)
                k = reasoning_of(i) if key in ("reasoning_content", "thinking") else texts_of(i)
                marked[key] = mark_text(m[key], k)
        if m.get("tool_calls"):
            marked["tool_calls"] = [_mark_call(c, texts_of(i), record_id) for c in m["tool_calls"]]
        out.append(marked)
    return out


def _mark_call(call: dict, i: int, record_id: str) -> dict:
    fn = dict(call.get("function") or {})
    _refuse_reserved(repr(fn), record_id, i // 2)
    if isinstance(fn.get("name"), str):
        fn["name"] = mark_text(fn["name"], i)
    if "arguments" in fn:
        fn["arguments"] = _mark_value(fn["arguments"], i)
    return {**call, "function": fn}


def _refuse_reserved(text: str, record_id: str, i: int) -> None:
    if _RESERVED.search(text) or re.search(_ESCAPED, text):
        raise TemplateError(
            f"record {record_id}: message {i} holds a private-use character of planes 15-16 (U+F0000, U+F0001 or "
            "U+100000-U+10FFFD), or its escape (\\U000f0000), that tokenmill reserves to locate message texts; remove it",
            reason="sentinel_collision",
        )


@dataclass
class Cut:
    """The render with its sentinels cut: the plain text and, per message, the spans its texts occupy."""

    text: str
    spans: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # field -> char spans in order
    unpaired: set[int] = field(default_factory=set)  # fields with a start or end sentinel the template lost
    marks: list[int] = field(default_factory=list)  # where each sentinel stood in the marked render, in order
    cut_before: list[int] = field(default_factory=list)  # characters cut through each mark, when any was escaped
    generation: list[tuple[int, int]] = field(default_factory=list)  # ``{% generation %}`` spans of the text

    def of_message(self, i: int) -> list[tuple[int, int]]:
        """Spans of every text of message ``i`` (reasoning included), sorted."""
        return sorted(self.spans.get(texts_of(i), []) + self.spans.get(reasoning_of(i), []))

    def literal(self) -> list[tuple[int, int]]:
        """Every message-text span, sorted."""
        return sorted(s for spans in self.spans.values() for s in spans if s[1] > s[0])

    def to_plain(self, position: int) -> int:
        """A position in the marked render -> the same position in :attr:`text` (two characters per sentinel
        that stood before it)."""
        k = bisect.bisect_left(self.marks, position)
        if not self.cut_before:  # every sentinel two characters wide
            return position - 2 * k
        return position - (self.cut_before[k - 1] if k else 0)


def cut_sentinels(marked: str) -> Cut:
    """Cut every sentinel (or its repr escape) out of ``marked``; pair each start with the next end of the same
    field."""
    escaped = "\\U000f000" in marked  # a template passed marked text through |string (repr)
    parts = (_SPLIT_ESCAPED if escaped else _SPLIT).split(marked)  # text, sentinel, ..., text: one pass
    if len(parts) == 1:
        return Cut(marked)
    texts = parts[0::2]
    cut, open_at, here, removed = Cut("".join(texts)), {}, 0, 0
    for k, sentinel in enumerate(parts[1::2]):
        here += len(texts[k])  # where the sentinel stood in the plain text
        if escaped:
            cut.marks.append(here + removed)
            removed += len(sentinel)
            cut.cut_before.append(removed)
            is_start, i = _read(sentinel)
        else:
            cut.marks.append(here + 2 * k)
            is_start, i = sentinel[0] == START, ord(sentinel[1]) - _INDEX_BASE
        if is_start:
            if i in open_at:
                cut.unpaired.add(i)
            open_at[i] = here
        elif i in open_at:
            cut.spans.setdefault(i, []).append((open_at.pop(i), here))
        else:
            cut.unpaired.add(i)
    cut.unpaired.update(open_at)
    return cut


def _read(sentinel: str) -> tuple[bool, int]:
    """(is a start, field) of a sentinel, raw (two characters) or repr-escaped (``\\U000f0000\\U0010xxxx``)."""
    if len(sentinel) == 2:
        return sentinel[0] == START, ord(sentinel[1]) - _INDEX_BASE
    return sentinel[9] == "0", int(sentinel[-6:], 16) - _INDEX_BASE
