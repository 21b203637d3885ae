"""Where each assistant turn's output lies in one rendered conversation.

Message texts are never searched for: their spans come from the renderer (:mod:`tokenmill.sft.spans`). What lies
between them is the template's own text, and only there do we look for the template's markers.

A template is calibrated once (per template and tokenizer): a probe conversation is rendered with sentinels and
from it we learn ``open`` (the template text that opens an assistant turn, e.g. ``<|im_start|>assistant\\n``),
``stop`` (what follows the assistant's content up to the first control token, e.g. ``<|im_end|>``,
``<|eot_id|>``, ``</s>``), whether the template renders a message's reasoning, and whether the sentinels leave
the render unchanged (``faithful``). Then, per conversation, one left-to-right pass: for each assistant message
its header is the last ``open`` in the template text just before its first span, its output ends with its last
span, and its stop marker is the template text that follows, before the next message's text. The pass is linear
in the number of spans; nothing is rendered or tokenized again.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

from tokenmill.errors import TemplateError
from tokenmill.sft.spans import (
    Cut,
    cut_sentinels,
    mark_messages,
    reasoning_of,
    texts_of,
)
from tokenmill.sft.template import ChatTemplate, render_template

_EMPTY_THINK = re.compile(r"\s*<think>\s*</think>\s*")  # GLM writes "\n<think></think>\n"
_THINK_CLOSE = re.compile(r"\s*</think>\s*")
_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)
PROBE_TOOL = {"type": "function", "function": {
    "name": "probe_tool", "description": "A probe.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": "A query."}}}}}


@dataclass(frozen=True)
class CallForm:
    """How a template reads an assistant tool call. ``apply_chat_template``'s form passes the arguments as a
    mapping and leaves out a content that is None; templates written for the OpenAI wire form concatenate the
    arguments as a JSON string (Functionary v3.2, DeepSeek V3.1) or read the call message's content as a string
    (QwQ, Qwen3, the DeepSeek R1 distills, V3.1): transformers drops a None content, so
    the empty string is the one text such a template can be given. Calibration picks the first form in which
    the template renders a tool call."""

    arguments_as_string: bool = False  # the arguments as their JSON text
    empty_content: bool = False  # a tool-call message without content given the empty string


CALL_FORMS = (CallForm(), CallForm(empty_content=True), CallForm(arguments_as_string=True),
              CallForm(arguments_as_string=True, empty_content=True))


@dataclass(frozen=True)
class TurnShape:
    """What calibration learned about a template's assistant turns."""

    open: str  # text that opens an assistant turn, right before its output
    stop: str  # text after the content through the first control token ("" when none is rendered)
    stop_marker: str  # the control token that ends the turn ("" when none)
    renders_reasoning: bool  # the template renders a message's `reasoning_content`
    faithful: bool = True  # the sentinel render, sentinels cut, equals the plain render on every probe
    needs_tools: bool = False  # the template renders only with a tool list (it iterates `tools` unconditionally)
    calibration_error: str = ""  # why no probe rendered ("" when calibrated); turns then end at a control token
    controls: tuple[str, ...] = ()  # the tokenizer's control-token strings
    after_output: str = ""  # the template text between an assistant output and the next message's text
    last_stop_marker: str = ""  # the control token that ends the conversation's last assistant turn ("" when none)
    prompt: str = ""  # what the generation prompt adds after a user message ("" when none, or when it rewrites)
    opener: str = ""  # the generation prompt's first control token (it opens a message: <|start|>, <|im_start|>)
    tool_after: str = ""  # what the template writes after a tool result that ends the conversation
    tool_prompt: str = ""  # what the generation prompt adds after a tool result ("" when none, or when it rewrites)
    call_stop: str = ""  # a tool call's end mark: its first control token through its last ("" when not learned)
    call_form: CallForm = CallForm()  # how the template reads a tool call (see :class:`CallForm`)


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
    msgs = [{"role": "system", "content": "probe system"}] if with_system else []
    msgs += [
        {"role": "user", "content": "probe user one"},
        {"role": "assistant", "content": "probe answer one", "reasoning_content": "Zq7r1"},
        {"role": "user", "content": "probe user two"},
        {"role": "assistant", "content": "probe answer two", "reasoning_content": "Zq7r2"},
    ]
    for m in msgs:
        if "reasoning_content" in m:
            m["thinking"] = m["reasoning_content"]
    return msgs


def _tricky_probes(with_system: bool) -> list[list[dict]]:
    """Conversations whose marked render must equal their plain render: padded texts, think blocks, tools."""
    head = [{"role": "system", "content": "  probe system \n"}] if with_system else []
    think = "<think>\nprobe reasoning\n</think>\n\nprobe answer"
    call = {"id": "abcdefghi", "type": "function",
            "function": {"name": "probe_tool", "arguments": {"q": " probe query ", "n": 3}}}
    return [
        head + [{"role": "user", "content": "\n probe user \n"}, {"role": "assistant", "content": f"  {think}  "},
                {"role": "user", "content": "<think>probe</think>"}, {"role": "assistant", "content": think}],
        head + [{"role": "user", "content": "probe user"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": " probe result ", "name": "probe_tool", "tool_call_id": "abcdefghi"},
                {"role": "assistant", "content": "probe answer"}],
    ]


@lru_cache(maxsize=64)
def calibrate(
    template: ChatTemplate, controls: tuple[str, ...], special_items: tuple[tuple[str, str], ...]
) -> TurnShape:
    """Learn a template's assistant-turn shape from one probe render (cached per template and tokenizer).

    A template that renders no probe (with or without a system message, with or without a tool list) gets a
    shape with ``calibration_error`` set rather than an exception: conversations that do render still go on.
    """
    special = dict(special_items)
    errors = []
    for tools in (None, [PROBE_TOOL]):
        for with_system in (True, False):
            try:
                shape = _calibrate_from(template, with_system, tools, controls, special)
            except TemplateError as exc:
                errors.append(str(exc))
                continue
            return shape
    return TurnShape("", "", "", False, faithful=False, controls=controls,
                     calibration_error=f"chat template ({template.origin}) renders no probe conversation: "
                                       f"{errors[-1] if errors else ''}")


def _calibrate_from(
    template: ChatTemplate, with_system: bool, tools: list | None, controls: tuple[str, ...], special: dict
) -> TurnShape:
    messages = _probe(with_system)
    cut = render_cut(template, messages, tools=tools, special=special)
    text, first = cut.text, 1 if with_system else 0
    a1, u2, a2 = (cut.spans.get(texts_of(first + k)) for k in (1, 2, 3))
    if not u2 or not a2 or not u2[-1][1] <= a2[0][0]:
        raise TemplateError(f"chat template ({template.origin}) does not render a user then an assistant message")
    pattern = _control_regex(controls)
    if a1 and a1[-1][1] <= u2[0][0]:
        stop, after = _learn_stop(text, a1[-1][1], u2[0][0], pattern), text[a1[-1][1] : u2[0][0]]
        stop = _whole_stop(template, messages[: first + 2], tools, special, text, a1[-1][1], stop, pattern)
    else:
        stop, after = _learn_stop(text, a2[-1][1], len(text), pattern), text[a2[-1][1] :]
    last_stop = _learn_stop(text, a2[-1][1], len(text), pattern)
    prompt = _learn_prompt(template, messages[: first + 3], tools, special)
    r2 = cut.spans.get(reasoning_of(first + 3))
    form = _learn_call_form(template, with_system, special)
    gap = text[u2[-1][1] : r2[0][0] if r2 and r2[0][0] < a2[0][0] else a2[0][0]]
    gap = gap[: _think_start(gap)]
    return TurnShape(
        open=_learn_open(gap, pattern), stop=stop, stop_marker=_last_control(stop, pattern),
        renders_reasoning=bool(r2), faithful=_faithful(template, with_system, tools, special),
        needs_tools=tools is not None, controls=controls, after_output=after,
        last_stop_marker=_last_control(last_stop, pattern),
        prompt=prompt, opener=_first_control(prompt, pattern),
        **_learn_tool_prompt(template, with_system, special, pattern, form), call_form=form,
    )


def _learn_call_form(template: ChatTemplate, with_system: bool, special: dict) -> CallForm:
    """The first :data:`CALL_FORMS` form in which ``template`` renders the tool probe's call (its text, not only
    an empty turn: a template that knows no tool calls renders an empty content); the default when none."""
    messages = [{k: v for k, v in m.items() if not (k == "content" and m.get("tool_calls"))}
                for m in _tricky_probes(with_system)[1]]  # a call without content, as records have it
    call = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    for form in CALL_FORMS:
        try:
            cut = render_cut(template, call_messages(messages, form), tools=[PROBE_TOOL], special=special)
        except TemplateError:
            continue
        if cut.spans.get(texts_of(call)):
            return form
    return CallForm()


def call_messages(messages: list[dict], form: CallForm) -> list[dict]:
    """``messages`` (``apply_chat_template`` form) with their tool calls in ``form``."""
    if form == CallForm():
        return messages
    return [_call_message(m, form) if m.get("tool_calls") else m for m in messages]


def _call_message(message: dict, form: CallForm) -> dict:
    out = dict(message)
    if form.empty_content and out.get("content") is None:
        out["content"] = ""
    if form.arguments_as_string:
        out["tool_calls"] = [_string_arguments(c) for c in out["tool_calls"]]
    return out


def _string_arguments(call: dict) -> dict:
    fn = dict(call.get("function") or {})
    args = fn.get("arguments")
    if args is not None and not isinstance(args, str):
        fn["arguments"] = json.dumps(args, ensure_ascii=False)
    return {**call, "function": fn}


def _learn_tool_prompt(template: ChatTemplate, with_system: bool, special: dict, pattern: re.Pattern | None,
                       form: CallForm) -> dict:
    """What the template writes after a tool result that ends the tool probe (``tool_after``) and what the
    generation prompt adds to it (``tool_prompt``): a template may open the reply to a tool result with another
    header than the one after a user (DeepSeek V3.2 writes none, and `\n\n<think></think>` as prompt). Empty
    strings when the template renders no such probe."""
    messages = call_messages([dict(m) for m in _tricky_probes(with_system)[1][:-1]], form)
    messages[-1]["content"] = "probe result"  # unpadded: its text ends where its span does
    try:
        cut = render_cut(template, messages, tools=[PROBE_TOOL], special=special)
        prompt = _learn_prompt(template, messages, [PROBE_TOOL], special)
    except TemplateError:
        return {}
    learned = {"call_stop": _learn_call_stop(template, messages[:-1], special, cut.text, pattern)}
    spans = cut.spans.get(texts_of(len(messages) - 1))
    if spans and prompt:
        learned.update(tool_after=cut.text[spans[-1][1]:], tool_prompt=prompt)
    return learned


def _learn_call_stop(template: ChatTemplate, messages: list[dict], special: dict, text: str,
                     pattern: re.Pattern | None) -> str:
    """What ends a tool-call turn: the text after the call when the conversation ends with it, from its first
    control token through its last (Solar Open writes ``<|tool_call:end|><|calls|>``), when the whole render
    ``text`` writes the same after it; "" otherwise."""
    try:
        cut = render_cut(template, messages, tools=[PROBE_TOOL], special=special)
    except TemplateError:
        return ""
    spans = cut.of_message(len(messages) - 1)
    if not spans:
        return ""
    end = spans[-1][1]
    tail = cut.text[end:].rstrip()
    first = pattern.search(tail) if pattern else None
    if first is None or not text.startswith(cut.text[: end + len(tail)]) or not _ends_in_control(tail, pattern):
        return ""
    return tail[first.start():]


_CONTROL_LIKE = re.compile(r"<\|[^|<>\s]{1,40}\|>|<｜[^｜<>]{1,40}｜>|</s>|<eos>|<end_of_turn>|\[/?[A-Z_]{2,20}\]")


def ends_no_turn(shape: TurnShape) -> bool:
    """Whether the calibrated template ends no assistant turn, last or not, with a control token: nothing the
    model could learn to stop with is ever trained."""
    return not (shape.stop_marker or shape.last_stop_marker or shape.calibration_error)


def untrained_stop_strings(shape: TurnShape, encode) -> list[str]:
    """Control-looking strings the template writes after an assistant output that are not control tokens of the
    tokenizer (``encode`` gives them several ordinary ids), when no control token ends the turn."""
    if shape.stop_marker or shape.calibration_error:
        return []
    found = dict.fromkeys(m.group() for m in _CONTROL_LIKE.finditer(shape.after_output))
    return [s for s in found if s not in shape.controls and len(encode(s)) > 1]


def render_cut(template: ChatTemplate, messages: list[dict], *, tools=None, special=None, record_id="<probe>",
               track_generation=False) -> Cut:
    """Render ``messages`` once with sentinels; the cut render (plain text and spans), generation spans mapped."""
    marked = mark_messages(messages, record_id=record_id)
    text, generation = render_template(template, marked, tools=tools, special_tokens=special, record_id=record_id,
                                       track_generation=track_generation)
    cut = cut_sentinels(text)
    cut.generation = [(cut.to_plain(a), cut.to_plain(b)) for a, b in generation]
    return cut


def _learn_prompt(template: ChatTemplate, messages: list[dict], tools, special: dict) -> str:
    """What ``add_generation_prompt`` appends to a conversation that ends with a user message: the header that
    precedes what the model emits. Everything after it in a turn is the model's to emit, hence trained (a
    channel header, a recipient, a lone space, an opening think tag the template writes after it); a turn
    that writes all of it (``<think>\\n`` included) trains none of it. "" when the template writes none, or when
    the prompt changes the text before it."""
    try:
        before, _ = render_template(template, messages, tools=tools, special_tokens=special)
        prompt, _ = render_template(template, messages, tools=tools, special_tokens=special, generation_prompt=True)
    except TemplateError:
        return ""
    return prompt[len(before):] if prompt.startswith(before) else ""


def _faithful(template: ChatTemplate, with_system: bool, tools, special: dict) -> bool:
    """Whether every probe the template renders renders the same with sentinels (cut) as without."""
    for messages in [_probe(with_system), *_tricky_probes(with_system)]:
        try:
            plain, _ = render_template(template, messages, tools=tools, special_tokens=special)
        except TemplateError:
            continue  # e.g. a template without tool roles: nothing to compare
        try:
            cut = render_cut(template, messages, tools=tools, special=special)
        except TemplateError:
            return False
        if cut.text != plain or cut.unpaired:
            return False
    return True


def _think_start(gap: str) -> int:
    """Where a reasoning block opened by the template begins in the gap (its end when there is none)."""
    pos = gap.rfind("<think>")
    return pos if pos >= 0 else len(gap)


@lru_cache(maxsize=64)
def _control_regex(controls: tuple[str, ...]) -> re.Pattern | None:
    if not controls:
        return None
    return re.compile("|".join(re.escape(c) for c in sorted(controls, key=len, reverse=True)))


def _learn_stop(text: str, start: int, limit: int, pattern: re.Pattern | None) -> str:
    match = pattern.search(text, start, limit) if pattern else None
    return text[start : match.end()] if match else ""


def _whole_stop(template: ChatTemplate, messages: list[dict], tools, special: dict, text: str, end: int, stop: str,
                pattern: re.Pattern | None) -> str:
    """The turn's whole end mark: what the template writes after the reply when the conversation ends with it,
    through its last control token (Apriel ends a turn with ``\n<|end|>\n</s>``, so ``</s>`` is the model's to
    emit), when the turn renders the same there as before a next message; ``stop`` otherwise (a template that
    writes ``eos_token`` only after the conversation's last reply)."""
    try:
        upto, _ = render_template(template, messages, tools=tools, special_tokens=special)
    except TemplateError:
        return stop
    tail = upto[end:].rstrip()
    if not stop or not text.startswith(upto[:end + len(tail)]) or not tail.startswith(stop):
        return stop
    return tail if _ends_in_control(tail, pattern) else stop


def _ends_in_control(text: str, pattern: re.Pattern | None) -> bool:
    found = list(pattern.finditer(text)) if pattern else []
    return bool(found) and found[-1].end() == len(text)


def _last_control(stop: str, pattern: re.Pattern | None) -> str:
    found = pattern.findall(stop) if pattern and stop else []
    return found[-1] if found else ""


def _learn_open(gap: str, pattern: re.Pattern | None) -> str:
    """The assistant header: the gap after the user's closing control token (or from the only one).

    Whitespace right after the closing token belongs to the turn it closes, not to the header: the Hermes-3
    tool-use template writes ``<|im_end|>\n<|im_start|>assistant\n`` after a user but
    ``<|im_end|><|im_start|>assistant\n`` after a tool result, and both headers end with the same ``\n``."""
    found = list(pattern.finditer(gap)) if pattern else []
    if len(found) >= 2:
        return gap[found[0].end() :].lstrip()
    if len(found) == 1:
        return gap[found[0].start() :]
    return gap


class _Territory:
    """The template's own text: the render outside message-text spans (which are sorted and disjoint)."""

    def __init__(self, literal: list[tuple[int, int]], length: int):
        self.starts = [a for a, _ in literal]
        self.ends = [b for _, b in literal]
        self.length = length

    def before(self, pos: int, floor: int) -> int:
        """Start of the template text that ends at ``pos``: the end of the last span ending at or before it."""
        k = bisect.bisect_right(self.ends, pos) - 1
        return max(floor, self.ends[k] if k >= 0 else 0)

    def after(self, pos: int) -> int:
        """End of the template text that starts at ``pos``: the start of the first span starting at or after it."""
        k = bisect.bisect_left(self.starts, pos)
        return self.starts[k] if k < len(self.starts) else self.length


def _header(render: str, shape: TurnShape, lo: int, hi: int, last: bool) -> tuple[int, int] | None:
    """(header start, output start) of the last (or first) assistant header in ``render[lo:hi]``: the generation
    prompt, else ``open``. A turn may write only part of the generation prompt (no ``<think>\\n`` on earlier
    turns): its header is then the longest whole part of the prompt it writes (see :func:`shared_prompt`)."""
    for o in (shape.prompt, shape.open, shape.open.strip()):
        if o:
            pos = render.rfind(o, lo, hi) if last else render.find(o, lo, hi)
            if pos >= 0:
                if o is shape.prompt or not shape.prompt:
                    return pos, pos + len(o)
                text = render[pos : min(hi, pos + len(shape.prompt))]
                shared = shared_prompt(shape.prompt, text, _control_regex(shape.controls))
                if shape.prompt.startswith(o):
                    return pos, pos + max(len(o), shared)
                # the turn's header goes on past where the prompt's ends (DeepSeek V3.2 writes `</think>` after
                # its header, where the prompt has `<think></think>`): what follows the shared part is emitted
                return pos, pos + (shared or len(o))
    return None


def shared_prompt(prompt: str, text: str, pattern: re.Pattern | None) -> int:
    """How much of the generation prompt ``prompt`` the turn ``text`` writes as its header: their common prefix,
    all of it or cut back to a whole part (through whitespace or a control token, ``pattern``), so that
    ``<think>\\n`` is not half matched by ``<tool_call>``. What follows it is the model's to emit, hence trained."""
    k = len(os.path.commonprefix([prompt, text]))
    if k == len(prompt):
        return k
    ends = {m.end() for m in pattern.finditer(prompt, 0, k)} if pattern else set()
    while k > 0 and not prompt[k - 1].isspace() and k not in ends:
        k -= 1
    return k


def _stop_end(render: str, shape: TurnShape, last: int, hi: int) -> int:
    """End of the end mark in the template text ``render[last:hi]``, or ``last`` when the turn renders none.

    The end mark is the one the template writes after this turn, whatever it is: the calibrated stop, else the
    calibrated marker, else the first control token (a template may end its last turn with ``eos_token`` only, or
    a final answer with ``<|return|>`` and other turns with ``<|end|>``); never one past the next assistant
    header."""
    if shape.stop and render.startswith(shape.stop, last) and last + len(shape.stop) <= hi:
        return last + len(shape.stop)
    pattern = _control_regex(shape.controls) if shape.call_stop else None
    first = pattern.search(render, last, hi) if pattern is not None else None
    if first and render.startswith(shape.call_stop, first.start()) and first.start() + len(shape.call_stop) <= hi:
        return first.start() + len(shape.call_stop)
    nxt = _header(render, shape, last, hi, last=False)
    limit = nxt[0] if nxt is not None else hi
    marker = shape.stop_marker
    pos = render.find(marker, last, limit) if marker else -1
    if pos >= 0:
        return pos + len(marker)
    return _uncalibrated_stop(render, last, limit, shape)


def _after_tool_prompt(render: str, shape: TurnShape, lo: int, output: int) -> int:
    """Where the output starts in a turn that opens with no assistant header: after the tool result's closing
    text and the part of the generation prompt after a tool result that the turn writes (see
    :func:`shared_prompt`); the first text of the message when the turn does not follow a tool result so."""
    if not shape.tool_prompt or not render.startswith(shape.tool_after, lo):
        return output
    head = lo + len(shape.tool_after)
    if head > output:
        return output
    return head + shared_prompt(shape.tool_prompt, render[head:output], _control_regex(shape.controls))


def _own(render: str, anchors: list[tuple[int, int]], shape: TurnShape) -> list[tuple[int, int]]:
    """The message's spans up to where another message opens: a template may write a text of this message again
    in a later one (gpt-oss names the tool a result answers, the call's name, in the tool message's header). A gap
    that holds the control token opening a message (the generation prompt's first) without the assistant header
    starts another message."""
    opener = shape.opener
    if not opener or len(anchors) < 2:
        return anchors
    for k in range(1, len(anchors)):
        a, b = anchors[k - 1][1], anchors[k][0]
        if render.find(opener, a, b) >= 0 and render.find(shape.prompt, a, b) < 0:
            return anchors[:k]
    return anchors


def _first_control(text: str, pattern: re.Pattern | None) -> str:
    match = pattern.search(text) if pattern and text else None
    return match.group() if match else ""


def _uncalibrated_stop(render: str, last: int, hi: int, shape: TurnShape) -> int:
    """Without calibration a turn ends at the first control token of the template text after it."""
    pattern = _control_regex(shape.controls)
    match = pattern.search(render, last, hi) if pattern else None
    return match.end() if match else last


def locate_assistant(
    render: str, cut: Cut, i: int, message: dict, shape: TurnShape, cursor: int, territory: _Territory,
) -> Turn | None:
    """Assistant message ``i``'s turn, from its spans; None when it has text the template did not render."""
    anchors = _own(render, cut.of_message(i), shape)
    if not anchors and (_has_text(message) or message.get("tool_calls")):
        return None
    if anchors:
        lo = territory.before(anchors[0][0], cursor)
        found = _header(render, shape, lo, anchors[0][0], last=True)
        start = found[1] if found else _after_tool_prompt(render, shape, lo, anchors[0][0])
    else:
        found = _header(render, shape, cursor, territory.after(cursor), last=False)
        if found is None:
            return None
        start = found[1]
    last = anchors[-1][1] if anchors else start
    hi = territory.after(last)
    stop_end = (_uncalibrated_stop(render, last, hi, shape) if shape.calibration_error
                else _stop_end(render, shape, last, hi))
    turn = Turn(message=i, start=start, end=last, stop_end=stop_end, content_start=start, anchors=anchors)
    reasoning = cut.spans.get(reasoning_of(i))
    content = cut.spans.get(texts_of(i))
    _mark_think(render, turn, (reasoning[0][0], reasoning[-1][1]) if reasoning else None,
                content[0] if content else None)
    return turn


def _mark_think(render: str, turn: Turn, reasoning: tuple | None, content: tuple | None) -> None:
    """Split a turn's leading reasoning (a rendered reasoning field, or a ``<think>`` block) from its answer."""
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
    cut: Cut, messages: list[dict], shape: TurnShape,
) -> tuple[list[Turn], list[tuple[int, int]], list[int]]:
    """Assistant turns in order, literal spans (every rendered message text), and indexes of messages with text
    the template did not render (or rendered only part of)."""
    render, literal = cut.text, cut.literal()
    territory = _Territory(literal, len(render))
    turns, unlocated, cursor, after_text = [], [], 0, 0
    unpaired = {k // 2 for k in cut.unpaired}
    for i, message in enumerate(messages):
        if i in unpaired:
            unlocated.append(i)
            continue
        own = cut.of_message(i)
        if message.get("role") != "assistant":
            if not own and _has_text(message):
                unlocated.append(i)
            after_text = own[-1][1] if own else after_text  # where the previous message's text ends
            continue
        turn = locate_assistant(render, cut, i, message, shape, max(cursor, after_text), territory)
        if turn is None:
            unlocated.append(i)
            continue
        turns.append(turn)
        cursor = after_text = max(cursor, turn.stop_end)
    return turns, literal, unlocated


def _has_text(message: dict) -> bool:
    content = message.get("content")
    return bool(content.strip()) if isinstance(content, str) else bool(content)
