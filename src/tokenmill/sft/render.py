"""One conversation -> token ids and a loss mask, from a single render and a single tokenization.

The conversation is rendered once with the model's chat template, with sentinels that give every message text's
span (see :mod:`tokenmill.sft.spans`); the assistant turns are read off those spans (:mod:`tokenmill.sft.masks`),
and the text is tokenized once with every message text passed as a literal span, so a control token a user
typed (``<|im_end|>``) stays ordinary text while the template's own control tokens stay control tokens. After
encoding, the control-token ids are checked to be exactly the template's control strings, one id each, and
nowhere else (``control_token_mismatch`` otherwise). A token is trained when its
characters overlap a trained span: an assistant's output (reasoning when trained, content, tool calls) plus the
end-of-turn marker the model must emit to stop. Role headers, system, user and tool text are never trained
(unless ``train_on="all"``).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenmill.errors import ConfigError, TemplateError
from tokenmill.sft.budget import render_session
from tokenmill.sft.lacks import lacks_sentence, missing_tool_support
from tokenmill.sft.masks import (
    Turn,
    TurnShape,
    calibrate,
    call_messages,
    ends_no_turn,
    locate_turns,
    render_cut,
    untrained_stop_strings,
)
from tokenmill.sft.spans import texts_of
from tokenmill.sft.template import ChatTemplate, render_template, special_token_kwargs
from tokenmill.tokenize.pieces import Encoded

if TYPE_CHECKING:
    from tokenmill.tokenize.tokenizer import Tokenizer

TRAIN_ON = ("assistant", "last", "all")
REASONING_POLICIES = ("inline", "drop", "reject")


@dataclass
class Rendered:
    """A rendered, tokenized conversation with its loss mask."""

    id: str
    text: str
    ids: np.ndarray  # uint32
    mask: np.ndarray  # bool, True = trained
    spans: list[tuple[int, int]]  # trained character spans of ``text``
    stats: dict[str, Any]
    messages: list[dict] = field(repr=False, default_factory=list)  # the HF-form messages that were rendered
    tools: list | None = None
    weights: np.ndarray | None = None  # float32 per token, only when a message carries a weight other than 1


def shape_of(template: ChatTemplate, tokenizer: Tokenizer) -> TurnShape:
    """The calibrated assistant-turn shape of ``template`` with ``tokenizer``'s control tokens (cached)."""
    controls = tuple(sorted(getattr(tokenizer, "special_tokens", {}) or ()))
    if not controls:
        controls = tuple(t for t in (getattr(tokenizer, "eos_token", None),) if t)
    return calibrate(template, controls, tuple(sorted(special_token_kwargs(tokenizer).items())))


def check_stop_token(template: ChatTemplate, tokenizer: Tokenizer, *, allow: bool = False) -> list[str]:
    """Refuse a template that ends no assistant turn with a control token of ``tokenizer`` (the model would never
    learn to stop): its end-of-turn string is no special token, or it writes none at all. With ``allow``, warn
    and return the strings instead of raising."""
    shape = shape_of(template, tokenizer)
    strings = untrained_stop_strings(shape, tokenizer.encode)
    if strings:
        why = (f"ends assistant turns with {', '.join(map(repr, strings))}, which tokenizer {tokenizer.name!r} does "
               "not have as a special token: it becomes several ordinary tokens and no example would train a stop "
               "token")
        fix = ("add it to the tokenizer as a special token (added_tokens in tokenizer.json with \"special\": true, "
               "or additional_special_tokens in tokenizer_config.json), use the model's own tokenizer")
    elif ends_no_turn(shape):
        why = (f"ends no assistant turn, the last one included, with a control token of tokenizer "
               f"{tokenizer.name!r} (it writes none after a reply): no example would train a stop token and the "
               "model would never learn to stop")
        fix = "use a template that ends a reply with the end-of-turn or eos token"
    else:
        return []
    if not allow:
        raise TemplateError(f"chat template ({template.origin}) {why}. To fix: {fix}, or pass --allow-untrained-stop "
                            "(sft.allow_untrained_stop) to go on anyway")
    warnings.warn(f"chat template ({template.origin}) {why}; going on (allow_untrained_stop)", stacklevel=2)
    return strings


def hf_messages(
    conv: dict, *, renders_reasoning: bool, reasoning_policy: str = "inline"
) -> tuple[list[dict], list | None, dict[str, int]]:
    """Conversation record -> (messages, tools) in ``apply_chat_template`` form, plus reasoning counts.

    None fields are left out (as transformers does); reasoning goes in ``reasoning_content`` and ``thinking``
    when the template renders it, else is inlined as ``<think>\\n…\\n</think>\\n\\n`` before the content,
    dropped (counted) or rejected, by ``reasoning_policy``.
    """
    rid = conv.get("id", "?")
    counts = {"reasoning_inlined": 0, "reasoning_dropped": 0}
    messages = []
    for i, m in enumerate(conv.get("messages") or []):
        out = {"role": m.get("role"), "content": m.get("content")}
        if m.get("name") is not None:
            out["name"] = m["name"]
        if m.get("tool_call_id") is not None:  # the call a tool result answers (Mistral's templates print it)
            out["tool_call_id"] = m["tool_call_id"]
        if m.get("tool_calls"):
            out["tool_calls"] = [_hf_tool_call(c) for c in m["tool_calls"]]
        reasoning = m.get("reasoning")
        if reasoning and renders_reasoning:
            out = {"thinking": reasoning, **out, "reasoning_content": reasoning}
        elif reasoning and reasoning_policy == "inline":
            out["content"] = f"<think>\n{reasoning}\n</think>\n\n{out['content'] or ''}"
            counts["reasoning_inlined"] += 1
        elif reasoning and reasoning_policy == "drop":
            counts["reasoning_dropped"] += 1
        elif reasoning:
            raise TemplateError(
                f"record {rid}: message {i} has reasoning the chat template does not render; use "
                "reasoning_policy='inline' or 'drop', or a template that renders reasoning_content",
                reason="reasoning_not_rendered",
            )
        messages.append({k: v for k, v in out.items() if v is not None})
    return messages, _hf_tools(conv.get("tools"), rid), counts


def _hf_tool_call(call: dict) -> dict:
    args = call.get("arguments")
    try:
        parsed = json.loads(args) if isinstance(args, str) else args
    except json.JSONDecodeError:
        parsed = args
    out = {"type": "function", "function": {"name": call.get("name"), "arguments": parsed}}
    if call.get("id") is not None:
        out["id"] = call["id"]
    return out


def _hf_tools(tools: Any, rid: str) -> list | None:
    if tools is None or tools == "":
        return None
    try:
        parsed = json.loads(tools) if isinstance(tools, str) else tools
    except json.JSONDecodeError as exc:
        raise TemplateError(f"record {rid}: tools is not valid JSON ({exc})", reason="invalid_tools") from exc
    if not isinstance(parsed, list):
        raise TemplateError(f"record {rid}: tools must be a JSON list of tool schemas", reason="invalid_tools")
    return parsed or None


@dataclass(frozen=True)
class MaskPolicy:
    """Which tokens are trained: ``train_on`` turns, with or without reasoning, and what to do with reasoning
    the template does not render. Raises :class:`ConfigError` listing every bad value."""

    train_on: str = "assistant"  # assistant | last | all
    train_reasoning: bool = True
    supervise_empty_think: bool = False
    reasoning_policy: str = "inline"  # inline | drop | reject

    def __post_init__(self) -> None:
        problems = []
        if self.train_on not in TRAIN_ON:
            problems.append(f"train_on={self.train_on!r}: expected one of {TRAIN_ON}")
        if self.reasoning_policy not in REASONING_POLICIES:
            problems.append(f"reasoning_policy={self.reasoning_policy!r}: expected one of {REASONING_POLICIES}")
        if problems:
            raise ConfigError(problems)


@dataclass
class Prepared:
    """A conversation rendered and located but not yet tokenized (phase 1 of :func:`render_conversations`)."""

    conv: dict
    id: str
    text: str
    messages: list[dict]
    tools: list | None
    generation: list
    turns: list[Turn]
    literal: tuple[tuple[int, int], ...]
    control: list[tuple[int, int]]  # the template's control-token strings (outside literal spans)
    neutralised: int  # control-token strings inside literal spans (encoded as text)
    spans: list[tuple[int, int]]
    owners: list[Turn | None]
    counts: dict[str, int]


def render_conversation(
    conv: dict,
    *,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    policy: MaskPolicy = MaskPolicy(),
) -> Rendered:
    """Render ``conv`` once, tokenize it once, and mask everything but what ``policy`` trains.

    Raises :class:`TemplateError` (with ``.reason``) when this record cannot be rendered or its turns located.
    """
    prepared = prepare_conversation(
        conv, tokenizer=tokenizer, template=template, shape=shape_of(template, tokenizer),
        special=special_token_kwargs(tokenizer), policy=policy,
    )
    encoded = tokenizer.encode_rendered(prepared.text, literal_spans=prepared.literal)
    return finish_conversation(prepared, encoded, tokenizer=tokenizer)


def render_conversations(
    convs: list[dict],
    *,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    policy: MaskPolicy = MaskPolicy(),
) -> list[Rendered | TemplateError]:
    """:func:`render_conversation` of many conversations with one batched tokenizer call.

    A conversation that cannot be rendered gets its :class:`TemplateError` in its place of the result.
    """
    out = prepare_conversations(convs, tokenizer=tokenizer, template=template, policy=policy)
    ready = [p for p in out if isinstance(p, Prepared)]
    encoded = iter(tokenizer.encode_rendered_batch([p.text for p in ready], [p.literal for p in ready],
                                                   layouts=[(p.control, p.neutralised) for p in ready], check=False))
    return [_finish_or_error(p, next(encoded), tokenizer) if isinstance(p, Prepared) else p for p in out]


def prepare_conversations(
    convs: list[dict], *, tokenizer: Tokenizer, template: ChatTemplate, policy: MaskPolicy = MaskPolicy(),
) -> list[Prepared | TemplateError]:
    """:func:`prepare_conversation` of each of ``convs`` (its :class:`TemplateError` in its place): the render,
    spans and checks that need the tokenizer's special tokens only, no encoder."""
    shape, special = shape_of(template, tokenizer), special_token_kwargs(tokenizer)
    out: list[Prepared | TemplateError] = []
    with render_session():  # sft/budget.py: the render alarm's handler installed once for the batch
        for conv in convs:
            try:
                out.append(prepare_conversation(
                    conv, tokenizer=tokenizer, template=template, shape=shape, special=special, policy=policy,
                ))
            except TemplateError as exc:
                out.append(exc)
    return out


def _finish_or_error(p: Prepared, encoded: tuple[np.ndarray, ...], tokenizer: Tokenizer) -> Rendered | TemplateError:
    try:
        return finish_conversation(p, encoded, tokenizer=tokenizer)
    except TemplateError as exc:
        return exc


def prepare_conversation(
    conv: dict, *, tokenizer: Tokenizer, template: ChatTemplate, shape: TurnShape, special: dict[str, str],
    policy: MaskPolicy = MaskPolicy(),
) -> Prepared:
    """Render ``conv``, locate its turns, and compute its literal and trained character spans."""
    rid = str(conv.get("id", "?"))
    messages, tools, counts = hf_messages(
        conv, renders_reasoning=shape.renders_reasoning, reasoning_policy=policy.reasoning_policy
    )
    messages = call_messages(messages, shape.call_form)
    cut = _render_marked(template, messages, tools, special, rid, conv, shape)
    cut_off = _inlined_cut_off(cut, messages, conv) if counts["reasoning_inlined"] else []
    if cut_off:  # rendered again, those messages with their own content only
        messages = [dict(m, content=conv["messages"][i].get("content")) if i in cut_off else m
                    for i, m in enumerate(messages)]
        messages = call_messages([{k: v for k, v in m.items() if v is not None} for m in messages], shape.call_form)
        cut = _render_marked(template, messages, tools, special, rid, conv, shape)
    if cut.unpaired or not shape.faithful:
        _check_plain(cut.text, template, messages, tools, special, rid)
    text, generation = cut.text, cut.generation
    turns, literal, unlocated = locate_turns(cut, messages, shape)
    control, neutralised = tokenizer.control_spans(text, literal)
    if _check_located(rid, messages, unlocated, tokenizer, policy.train_on):
        _check_sanitised(rid, text, control, template, messages, tools, special, tokenizer)
    spans, owners = _trained_spans(text, turns, conv, generation, policy=policy)
    counts["empty_think_unsupervised"] = 0 if policy.supervise_empty_think else sum(
        1 for t in owners if t is not None and t.empty_think
    )
    return Prepared(conv, rid, text, messages, tools, generation, turns, tuple(literal), control, neutralised,
                    spans, owners, counts)


def _render_marked(template: ChatTemplate, messages: list[dict], tools, special: dict, rid: str, conv: dict,
                   shape: TurnShape):
    try:
        return render_cut(template, messages, tools=tools, special=special, record_id=rid,
                          track_generation=template.has_generation_blocks)
    except TemplateError as exc:
        raise _explained(exc, template, conv, rid, needs_tools=shape.needs_tools and not tools) from exc


def _inlined_cut_off(cut, messages: list[dict], conv: dict) -> set[int]:
    """Messages whose inlined reasoning the template cut off (it splits the content at ``</think>``, as DeepSeek's
    templates do): their reasoning text is rendered nowhere. Inlined, such a message would keep the ``\\n\\n``
    between ``</think>`` and the content, which the source conversation does not have."""
    out = set()
    for i, m in enumerate(conv.get("messages") or []):
        reasoning = m.get("reasoning")
        if not reasoning or not isinstance(messages[i].get("content"), str) or "thinking" in messages[i]:
            continue
        pieces = {cut.text[a:b] for a, b in cut.spans.get(texts_of(i), [])}
        if reasoning.strip() not in pieces:
            out.add(i)
    return out


def _explained(exc: TemplateError, template: ChatTemplate, conv: dict, rid: str, *, needs_tools: bool
               ) -> TemplateError:
    """``exc`` with its cause said first: the record uses tools the template never names, or the template
    renders only with a tool list and the record has none."""
    if exc.reason != "template_error":
        return exc
    lack = missing_tool_support(template.source, conv)
    if lack:
        why = lacks_sentence(lack)
    elif needs_tools:
        why = ("this chat template renders only with a tool list (it iterates `tools`) and this record has none; "
               "give such records a template that renders plain conversations too")
    else:
        return exc
    return TemplateError(f"record {rid}: {why} ({str(exc).removeprefix(f'record {rid}: ')})", reason=exc.reason)


def _check_plain(text: str, template: ChatTemplate, messages: list[dict], tools, special: dict, rid: str) -> None:
    """The sentinel render, cut, must be what the template renders without sentinels (a second render, only for
    templates that failed this check at calibration or conversations whose sentinels the template lost)."""
    plain, _ = render_template(template, messages, tools=tools, special_tokens=special, record_id=rid)
    if plain != text:
        raise TemplateError(
            f"record {rid}: the chat template renders this conversation differently when its texts are marked, "
            "so where each message lies cannot be known; it is left out", reason="spans_unresolved",
        )


def finish_conversation(p: Prepared, encoded: tuple[np.ndarray, ...], *, tokenizer: Tokenizer) -> Rendered:
    """The loss mask, weights and stats of a prepared conversation from its ids and char offsets."""
    ids, starts, ends = encoded[0], np.asarray(encoded[1], dtype=np.int64), np.asarray(encoded[2], dtype=np.int64)
    if not isinstance(encoded, Encoded) and not tokenizer.controls_match((ids, starts, ends), p.text, p.control):
        ids, starts, ends = tokenizer.encode_pieces(p.text, p.control)  # the whole-text encoder fused a boundary
        if not tokenizer.controls_match((ids, starts, ends), p.text, p.control):
            _control_mismatch(p.id)
    mask, owner = _token_owner(starts, ends, p.spans)
    with_reasoning = {i for i, m in enumerate(p.conv.get("messages") or []) if m.get("reasoning")}
    stats = _stats(ids, mask, owner, p, with_reasoning, starts, ends)
    if p.generation and len(p.generation) != sum(1 for m in p.messages if m.get("role") == "assistant"):
        stats["generation_blocks_ignored"] = len(p.generation)
    weights = _token_weights(owner, p.owners, p.conv)
    return Rendered(p.id, p.text, np.asarray(ids, dtype=np.uint32), mask, p.spans, stats, p.messages, p.tools,
                    weights)


def _control_mismatch(rid: str) -> None:
    raise TemplateError(
        f"record {rid}: after encoding, the control tokens are not exactly the chat template's own control "
        "strings; it is left out", reason="control_token_mismatch",
    )


def _check_sanitised(rid: str, text: str, control: list, template: ChatTemplate, messages: list[dict], tools,
                     special: dict, tokenizer: Tokenizer) -> None:
    """A message holding a control string was not rendered where its sentinels say: render once more with every
    control string of every text replaced by a plain character, and require the same control tokens in the
    template text. Equal: the message was dropped, not copied somewhere unmarked. Different: it is left out."""
    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return tokenizer.control_pattern.sub("\u00b7", value) if tokenizer.control_pattern else value
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    cut = render_cut(template, clean(messages), tools=tools, special=special, record_id=rid)
    sane, _ = tokenizer.control_spans(cut.text, cut.literal())
    if [cut.text[a:b] for a, b in sane] != [text[a:b] for a, b in control]:
        raise TemplateError(
            f"record {rid}: a message holds a control-token string and the template renders it where it cannot "
            "be kept as plain text; remove the control string", reason="control_token_in_content",
        )


def _check_located(rid: str, messages: list[dict], unlocated: list[int], tokenizer: Tokenizer, train_on: str) -> bool:
    """Reject what cannot be masked; True when an unrendered message holds a control string (check it further)."""
    further = False
    for i, m in enumerate(messages):
        calls, answers = m.get("tool_calls"), m.get("tool_call_id")
        if not (calls or answers):
            continue
        ids = " ".join(str(c.get("id") or "") for c in calls or []) + str(answers or "")
        if ids.strip() and tokenizer.count_literal_specials(ids):
            raise TemplateError(f"record {rid}: message {i} has a tool-call id holding a control-token string; "
                                "remove it", reason="control_token_in_content")
    for i in unlocated:
        m = messages[i]
        text = m.get("content") if isinstance(m.get("content"), str) else ""
        if m.get("role") == "assistant" and train_on != "all":
            raise TemplateError(
                f"record {rid}: assistant message {i} was not found in the rendered template; the template "
                "drops or rewrites it, so its loss mask cannot be derived", reason="assistant_not_rendered",
            )
        further = further or bool(text and tokenizer.count_literal_specials(text))
    return further


def _weight(conv: dict, index: int) -> float:
    """A message's loss weight as the shards store it (float32: a weight too small for it trains nothing)."""
    value = (conv.get("messages") or [])[index].get("weight")
    return 1.0 if value is None else float(np.float32(value))


def _trained_spans(
    text: str, turns: list[Turn], conv: dict, generation: list, *, policy: MaskPolicy,
) -> tuple[list[tuple[int, int]], list[Turn | None]]:
    """Trained character spans and the turn each one belongs to."""
    if policy.train_on == "all":
        return [(0, len(text))], [None]
    n_assistant = sum(1 for m in conv.get("messages") or [] if m.get("role") == "assistant")
    use_generation = bool(generation) and len(generation) == n_assistant == len(turns)
    last_assistant = max((t.message for t in turns), default=-1)
    spans, owners = [], []
    for k, turn in enumerate(turns):
        if (policy.train_on == "last" and turn.message != last_assistant) or _weight(conv, turn.message) == 0:
            continue
        start, end = turn.start, turn.stop_end
        if use_generation:  # a {% generation %} block bounds the output, never widens it past header or end mark
            start, end = max(generation[k][0], turn.start), generation[k][1]
            if end >= turn.end:
                end = turn.stop_end
        if turn.empty_think and not policy.supervise_empty_think:
            start = max(start, turn.empty_think[1])
        if turn.reasoning and not policy.train_reasoning:
            start = max(start, turn.content_start)
        if start < end:
            spans.append((start, end))
            owners.append(turn)
    return spans, owners


def _turn_without_stop(owners: list[Turn | None], end: int) -> int | None:
    """The message index of the first trained assistant turn with no end mark before text that follows it."""
    return next((t.message for t in owners if t is not None and t.stop_end <= t.end and t.stop_end < end), None)


def _token_owner(starts: np.ndarray, ends: np.ndarray, spans: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(mask, owner): a token is trained when its characters overlap a span; owner is that span's index or -1.

    ``spans`` are sorted and disjoint; ``starts`` and ``ends`` are int64 arrays.
    """
    if not spans:
        return np.zeros(len(starts), dtype=bool), np.full(len(starts), -1, dtype=np.int64)
    n = len(spans)
    if n == 1:  # one trained span (most conversations): the overlap test itself, no search
        (a, b), = spans
        mask = (starts < b) & (ends > a)
        return mask, np.where(mask, 0, -1)
    lo = np.fromiter((a for a, _ in spans), dtype=np.int64, count=n)
    hi = np.fromiter((b for _, b in spans), dtype=np.int64, count=n)  # contiguous: searchsorted copies no view
    idx = hi.searchsorted(starts, side="right")
    mask = (idx < n) & (ends > lo[np.minimum(idx, n - 1)])
    return mask, np.where(mask, idx, -1)


def _token_weights(owner: np.ndarray, owners: list[Turn | None], conv: dict) -> np.ndarray | None:
    per_span = [1.0 if t is None else _weight(conv, t.message) for t in owners]
    if all(w == 1.0 for w in per_span):
        return None
    table = np.array(per_span + [0.0], dtype=np.float32)  # index -1 -> 0.0 (untrained)
    return table[owner]


def _stats(
    ids, mask: np.ndarray, owner: np.ndarray, p: Prepared, with_reasoning: set[int], starts: np.ndarray,
    ends: np.ndarray,
) -> dict[str, Any]:
    owners, turns = p.owners, p.turns
    trained = int(np.count_nonzero(mask))
    if all(t is not None and t.start <= a and b <= t.stop_end for t, (a, b) in zip(owners, p.spans)):
        assistant = trained  # every trained span lies in its turn, so every token overlapping one overlaps the turn
        in_turn = None
    else:
        in_turn = _token_owner(starts, ends, [(t.start, t.stop_end) for t in turns])[0]
        assistant = int(np.count_nonzero(mask & in_turn))
    reasoning_spans = [t.reasoning for t in turns if t.reasoning]
    if not reasoning_spans:
        reasoning = 0
    else:
        in_reasoning = mask & _token_owner(starts, ends, reasoning_spans)[0]
        reasoning = int(np.count_nonzero(in_reasoning if in_turn is None else in_reasoning & in_turn))
    if len(owners) == 1:
        by_turn = [trained]  # every trained token is the one span's
    else:
        by_turn = np.bincount(owner[mask], minlength=len(owners)).tolist() if len(owners) else []
    stats = {
        "tokens": int(len(ids)),
        "trained_tokens": trained,
        "trained_by_role": {"assistant": assistant, "other": trained - assistant},
        "trained_by_turn": by_turn,
        "reasoning_trained_tokens": reasoning,
        "answer_trained_tokens": assistant - reasoning,
        # the last trained turn ends in its end mark: what teaches the model to stop (a template may write one
        # after the conversation's last reply only)
        "stop_token_trained": bool(owners) and (owners[-1] is None or owners[-1].stop_end > owners[-1].end),
        # a trained turn that renders no end mark though text follows it (sft/failclosed.py); None when none
        "turn_without_stop": _turn_without_stop(owners, len(p.text.rstrip())),
        "control_tokens_neutralised": p.neutralised,
        "control_tokens_real": len(p.control),
        "reasoning_dropped_by_template": sum(1 for t in turns if t.message in with_reasoning and not t.reasoning),
        "assistant_turns": len(turns),
        "trained_turns": len(owners),
    }
    stats.update(p.counts)
    return stats
