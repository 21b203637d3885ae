"""Where each assistant turn's output lies in one rendered conversation.

A template is calibrated once: a probe conversation with sentinel contents is rendered and from it we learn
``open`` (the text that opens an assistant turn, e.g. ``<|im_start|>assistant\\n``), ``stop`` (what follows the
assistant's content up to the first control token, e.g. ``<|im_end|>``, ``<|eot_id|>``, ``</s>``) and whether
the template renders a message's reasoning. Then, per conversation, a single left-to-right pass over the render
finds each assistant turn: its header (``open``), its anchors (reasoning, content, tool calls) and its stop
marker. Everything between the header and the end of the stop marker is the turn's output. Non-assistant
contents are located in the gaps between turns only to mark them as literal text. The pass is linear in the
length of the render; nothing is rendered or tokenized again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache

from tokenmill.errors import TemplateError
from tokenmill.sft.template import ChatTemplate, render_template

_SENT = "Zq7"  # sentinel stem: rare, survives trim/strip, never a control token
_EMPTY_THINK = re.compile(r"<think>\s*</think>\s*")
_THINK_CLOSE = re.compile(r"\s*</think>\s*")
_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


@dataclass(frozen=True)
class TurnShape:
    """What calibration learned about a template's assistant turns."""

    open: str  # text that opens an assistant turn, right before its output
    stop: str  # text after the content through the first control token ("" when none is rendered)
    stop_marker: str  # the control token that ends the turn ("" when none)
    renders_reasoning: bool  # the template renders a message's `reasoning_content`


@dataclass
class Turn:
    """One located assistant message: char offsets in the render."""

    message: int  # index in the message list
    start: int  # output start (after the header)
    end: int  # end of the output (before the stop marker)
    stop_end: int  # end of the stop marker (== end when no stop was rendered)
    content_start: int  # where the answer begins (after any reasoning)
    reasoning: tuple[int, int] | None = None  # reasoning block incl. its tags, when rendered
    empty_think: tuple[int, int] | None = None  # an empty <think></think> block the template wrote
    anchors: list[tuple[int, int]] = field(default_factory=list)


def _probe(with_system: bool) -> list[dict]:
    msgs = [{"role": "system", "content": f"{_SENT}sys"}] if with_system else []
    msgs += [
        {"role": "user", "content": f"{_SENT}u1"},
        {"role": "assistant", "content": f"{_SENT}a1", "reasoning_content": f"{_SENT}r1"},
        {"role": "user", "content": f"{_SENT}u2"},
        {"role": "assistant", "content": f"{_SENT}a2", "reasoning_content": f"{_SENT}r2"},
    ]
    for m in msgs:
        if "reasoning_content" in m:
            m["thinking"] = m["reasoning_content"]
    return msgs


@lru_cache(maxsize=64)
def calibrate(
    template: ChatTemplate, controls: tuple[str, ...], special_items: tuple[tuple[str, str], ...]
) -> TurnShape:
    """Learn a template's assistant-turn shape from one probe render (cached per template and tokenizer)."""
    special = dict(special_items)
    text, error = None, None
    for with_system in (True, False):
        try:
            text, _ = render_template(template, _probe(with_system), special_tokens=special, record_id="<probe>")
            break
        except TemplateError as exc:
            error = exc
    if text is None:
        raise TemplateError(f"chat template ({template.origin}) cannot render a plain user/assistant probe: {error}")
    marks = {k: text.find(f"{_SENT}{k}") for k in ("a1", "u2", "a2")}
    if marks["u2"] < 0 or not marks["u2"] < marks["a2"]:
        raise TemplateError(f"chat template ({template.origin}) does not render a user then an assistant message")
    pattern = _control_regex(controls)
    if 0 <= marks["a1"] < marks["u2"]:
        stop = _learn_stop(text, marks["a1"] + len(_SENT) + 2, marks["u2"], pattern)
    else:
        stop = _learn_stop(text, marks["a2"] + len(_SENT) + 2, len(text), pattern)
    r2 = text.find(f"{_SENT}r2", marks["u2"])
    gap = text[marks["u2"] + len(_SENT) + 2 : r2 if 0 <= r2 < marks["a2"] else marks["a2"]]
    gap = gap[: _think_start(gap)]
    return TurnShape(
        open=_learn_open(gap, pattern),
        stop=stop,
        stop_marker=_last_control(stop, pattern),
        renders_reasoning=f"{_SENT}r2" in text,
    )


def _think_start(gap: str) -> int:
    """Where a reasoning block opened by the template begins in the gap (its end when there is none)."""
    pos = gap.rfind("<think>")
    return pos if pos >= 0 else len(gap)


def _control_regex(controls: tuple[str, ...]) -> re.Pattern | None:
    if not controls:
        return None
    return re.compile("|".join(re.escape(c) for c in sorted(controls, key=len, reverse=True)))


def _learn_stop(text: str, start: int, limit: int, pattern: re.Pattern | None) -> str:
    match = pattern.search(text, start, limit) if pattern else None
    return text[start : match.end()] if match else ""


def _last_control(stop: str, pattern: re.Pattern | None) -> str:
    found = pattern.findall(stop) if pattern and stop else []
    return found[-1] if found else ""


def _learn_open(gap: str, pattern: re.Pattern | None) -> str:
    """The assistant header: the gap after the user's closing control token (or from the only one)."""
    found = list(pattern.finditer(gap)) if pattern else []
    if len(found) >= 2:
        return gap[found[0].end() :]
    if len(found) == 1:
        return gap[found[0].start() :]
    return gap


def text_variants(text: str) -> list[str]:
    """The forms a template may render a text in: as is, stripped, or after its last ``</think>``."""
    out = []
    for v in (text, text.strip(), text.split("</think>")[-1].strip()):
        if v and v not in out:
            out.append(v)
    return out


def find_text(render: str, text: str, start: int, end: int | None = None) -> tuple[int, int] | None:
    """The first span at or after ``start`` where ``text`` (or a variant of it) was rendered."""
    for v in text_variants(text):
        pos = render.find(v, start, end if end is not None else len(render))
        if pos >= 0:
            return pos, pos + len(v)
    return None


def _tool_call_texts(message: dict) -> list[str]:
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call)
        out.append(str(fn.get("name", "")))
        args = fn.get("arguments")
        out.append(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
    return [t for t in out if t]


def _find_open(render: str, shape: TurnShape, start: int) -> int:
    for o in (shape.open, shape.open.strip()):
        if o:
            pos = render.find(o, start)
            if pos >= 0:
                return pos
    return -1


def _output_start(render: str, shape: TurnShape, lo: int, first_anchor: int) -> tuple[int, int]:
    """(header start, output start): the last header before the first anchor."""
    for o in (shape.open, shape.open.strip()):
        if o:
            pos = render.rfind(o, lo, first_anchor)
            if pos >= 0:
                return pos, pos + len(o)
    return first_anchor, first_anchor


def _anchors(render: str, message: dict, shape: TurnShape, start: int) -> tuple[list, tuple | None, tuple | None]:
    """Sequential spans of reasoning, content and tool calls from ``start``: (anchors, reasoning, content)."""
    anchors, reasoning, content, cursor = [], None, None, start
    if shape.renders_reasoning and message.get("reasoning_content"):
        reasoning = find_text(render, message["reasoning_content"], cursor)
        if reasoning:
            anchors.append(reasoning)
            cursor = reasoning[1]
    if message.get("content"):
        content = find_text(render, message["content"], cursor)
        if content:
            anchors.append(content)
            cursor = content[1]
    for text in _tool_call_texts(message):
        span = find_text(render, text, cursor)
        if span:
            anchors.append(span)
            cursor = span[1]
    return anchors, reasoning, content


def _stop_end(render: str, shape: TurnShape, last: int) -> int:
    """End of the stop marker that follows ``last``, or ``last`` when the turn renders none."""
    if shape.stop and render.startswith(shape.stop, last):
        return last + len(shape.stop)
    if not shape.stop_marker:
        return last
    pos = render.find(shape.stop_marker, last)
    nxt = _find_open(render, shape, last)
    if pos < 0 or (0 <= nxt < pos):
        return last
    return pos + len(shape.stop_marker)


def locate_assistant(render: str, message: dict, index: int, shape: TurnShape, cursor: int) -> tuple[Turn, int] | None:
    """Locate one assistant message at or after ``cursor``; returns the turn and its header start."""
    head = _find_open(render, shape, cursor)
    anchors, reasoning, content = _anchors(render, message, shape, head if head >= 0 else cursor)
    if not anchors and (message.get("content") or message.get("tool_calls")):
        return None
    if anchors:
        header_start, start = _output_start(render, shape, cursor, anchors[0][0])
    elif head >= 0:
        header_start, start = head, head + len(shape.open)
    else:
        return None
    last = anchors[-1][1] if anchors else start
    stop_end = _stop_end(render, shape, last)
    turn = Turn(message=index, start=start, end=last, stop_end=stop_end, content_start=start, anchors=anchors)
    _mark_think(render, turn, reasoning, content)
    return turn, header_start


def _mark_think(render: str, turn: Turn, reasoning: tuple | None, content: tuple | None) -> None:
    """Split a turn's leading reasoning (a located reasoning field, or a ``<think>`` block) from its answer."""
    empty = _EMPTY_THINK.match(render, turn.start, turn.end)
    if empty:
        turn.empty_think = (turn.start, empty.end())
        turn.content_start = empty.end()
    elif reasoning:
        close = _THINK_CLOSE.match(render, reasoning[1])
        turn.reasoning = (turn.start, close.end() if close else reasoning[1])
        turn.content_start = content[0] if content else turn.reasoning[1]
    else:
        block = _THINK_BLOCK.match(render, turn.start, turn.end)
        if block:
            turn.reasoning = (turn.start, block.end())
            turn.content_start = block.end()


def locate_turns(
    render: str, messages: list[dict], shape: TurnShape
) -> tuple[list[Turn], list[tuple[int, int]], list[int]]:
    """Assistant turns in order, literal spans (every located message text), and indexes of messages not located.

    Non-assistant texts are searched in the gap before the next assistant header; one not found there is
    carried to the next gap (some templates move the system prompt next to the last user message).
    """
    turns, literal, pending, unlocated = [], [], [], []
    cursor = 0
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            pending.append(i)
            continue
        found = locate_assistant(render, message, i, shape, cursor)
        if found is None:
            unlocated.append(i)
            continue
        turn, header_start = found
        pending = _place_texts(render, messages, pending, cursor, header_start, literal)
        literal.extend(turn.anchors)
        turns.append(turn)
        cursor = turn.stop_end
    pending = _place_texts(render, messages, pending, cursor, len(render), literal)
    unlocated.extend(i for i in pending if messages[i].get("content"))
    literal.sort()
    return turns, literal, sorted(unlocated)


def _place_texts(render: str, messages: list[dict], pending: list[int], lo: int, hi: int, literal: list) -> list[int]:
    """Locate pending non-assistant texts in ``render[lo:hi]`` in order; returns those still not found."""
    left, cursor = [], lo
    for i in pending:
        text = messages[i].get("content")
        span = find_text(render, text, cursor, hi) if isinstance(text, str) and text else None
        if span:
            literal.append(span)
            cursor = span[1]
        elif text:
            left.append(i)
    return left
