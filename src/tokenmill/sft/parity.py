"""Proof that written ids are the ids ``transformers``' ``apply_chat_template`` gives for the same conversation.

Which examples are checked (:class:`VerifyPlan`): the first ``verify`` of every work unit, and also the first
example of every *shape* the unit holds (system message or not, tools, tool calls, tool results, reasoning,
several assistant turns, literal control strings, truncation), so a rare shape is checked even when it comes
late. Shapes are a handful of flags, so this adds at most a few dozen checks per unit.

Deliberate differences from ``apply_chat_template`` are counted apart from real ones:

- ``literal_control_strings``: a control string typed inside a message (``<|im_end|>``) is encoded as text,
  where ``apply_chat_template`` makes it a control token. Such an example is still checked: its control ids must
  be, in order, the control ids ``apply_chat_template`` gives once every typed control string is replaced by a
  plain character (a sanitised render).
- ``tool_arguments_decoded``: tool-call ``arguments`` given as a JSON string are decoded to an object before
  rendering (templates expect an object; both sides then render the same messages).
- assistant turns the template does not render are rejected (``assistant_not_rendered``), never written.

The loss mask is checked too (:func:`check_mask`): on every assistant turn for which transformers' own renders
give a reference (:mod:`tokenmill.sft.maskref`), the trained tokens must be exactly the reference's.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tokenmill.errors import ParityError
from tokenmill.sft.maskref import mask_differences, reference_turns
from tokenmill.sft.render import MaskPolicy, Rendered
from tokenmill.sft.template import ChatTemplate

SHAPES = ("system", "tools", "tool_calls", "tool_results", "reasoning", "multi_turn", "literal_control_strings",
          "truncated")


def check_parity(conv: dict, rendered: Rendered, hf_tokenizer: Any, template: ChatTemplate) -> str | None:
    """Compare ``rendered.ids`` with ``hf_tokenizer.apply_chat_template`` on the same messages and tools.

    Returns None when they are equal, or a note when the example differs only deliberately (literal control
    strings, checked against a sanitised render). Raises :class:`ParityError` naming the record and the first
    differing position on a real difference.
    """
    rid = conv.get("id", rendered.id)
    neutralised = rendered.stats.get("control_tokens_neutralised", 0)
    got = [int(i) for i in rendered.ids]
    if neutralised:
        _check_sanitised(rid, got, rendered, hf_tokenizer, template)
        return (f"record {rid}: exempt from exact parity, {neutralised} literal control token(s) were "
                "neutralised; its control tokens match a sanitised render")
    want = _reference(hf_tokenizer, rendered.messages, rendered.tools, template)
    if got == want:
        return None
    at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    ours = hf_tokenizer.decode(got[max(0, at - 3) : at + 5])
    theirs = hf_tokenizer.decode(want[max(0, at - 3) : at + 5])
    raise ParityError(
        f"record {rid}: token ids differ from transformers' apply_chat_template at position {at} "
        f"(ours {len(got)} ids, reference {len(want)}): ours {ours!r} vs reference {theirs!r}; "
        f"check that the tokenizer and chat template ({template.origin}) are the ones the model uses"
    )


def check_mask(conv: dict, rendered: Rendered, hf_tokenizer: Any, template: ChatTemplate, policy: MaskPolicy) -> int:
    """Compare ``rendered.mask`` with the reference mask; the number of assistant turns compared (0 when the
    policy trains other than every assistant turn in full, or no turn has a reference). Raises
    :class:`ParityError` naming the record and the first differing token."""
    weights = [m.get("weight") for m in conv.get("messages") or []]
    if (policy.train_on != "assistant" or not policy.train_reasoning or policy.supervise_empty_think
            or any(w is not None and float(w) == 0 for w in weights) or not callable(hf_tokenizer)):
        return 0
    controls = _special_strings(hf_tokenizer)
    with reference_clock(template):
        differences = mask_differences(hf_tokenizer, rendered, template.source, controls)
    if differences:
        raise ParityError(
            f"record {conv.get('id', rendered.id)}: loss mask differs from the reference built from "
            f"apply_chat_template's renders (chat template {template.origin}): {differences[0]}"
        )
    with reference_clock(template):
        return len(reference_turns(hf_tokenizer, rendered.messages, rendered.tools, template.source, controls))


@contextmanager
def reference_clock(template: ChatTemplate):
    """transformers' render of ``template`` reads the clock at ``template.date``, as ours does, while in this block.

    ``apply_chat_template`` passes no callable to a template (its variables are made plain data), so the fixed
    ``strftime_now`` goes where transformers' own is: the globals of its compiled template (cached per source),
    put back on leaving. A template that reads no clock is left alone."""
    compiled = _hf_compiled(template.source) if template.stamps_time else None
    if compiled is None:
        yield
        return
    saved = compiled.globals.get("strftime_now")
    compiled.globals["strftime_now"] = template.clock["strftime_now"]
    try:
        yield
    finally:
        compiled.globals["strftime_now"] = saved


def _hf_compiled(source: str) -> Any:
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template
    except ImportError:  # no transformers, or a version without it: the reference reads the real clock
        return None
    return _compile_jinja_template(source)


def _reference(hf_tokenizer: Any, messages: list[dict], tools: list | None, template: ChatTemplate) -> list[int]:
    with reference_clock(template):
        return list(hf_tokenizer.apply_chat_template(
            messages, tools=tools, chat_template=template.source, tokenize=True, add_generation_prompt=False,
            return_dict=False,
        ))


def _check_sanitised(rid: str, got: list[int], rendered: Rendered, hf_tokenizer: Any, template: ChatTemplate) -> None:
    specials = _special_ids(hf_tokenizer)
    typed = _special_strings(hf_tokenizer)
    clean = [{k: _sanitise(v, typed) for k, v in m.items()} for m in rendered.messages]
    want = [i for i in _reference(hf_tokenizer, clean, rendered.tools, template) if i in specials]
    ours = [i for i in got if i in specials]
    if ours != want:
        raise ParityError(
            f"record {rid}: its control tokens differ from those of apply_chat_template on the same conversation "
            f"with the typed control strings removed (ours {len(ours)}, reference {len(want)}); the template's "
            f"own control tokens must stay control tokens (chat template {template.origin})"
        )


def _special_ids(hf_tokenizer: Any) -> set[int]:
    ids = getattr(hf_tokenizer, "all_special_ids", None)
    added = getattr(hf_tokenizer, "added_tokens_decoder", None) or {}
    return set(ids or []) | {int(i) for i, t in added.items() if getattr(t, "special", False)}


def _special_strings(hf_tokenizer: Any) -> list[str]:
    added = getattr(hf_tokenizer, "added_tokens_decoder", None) or {}
    names = {str(t) for t in added.values() if getattr(t, "special", False)}
    names |= set(getattr(hf_tokenizer, "all_special_tokens", None) or [])
    return sorted(names, key=len, reverse=True)


def _sanitise(value: Any, typed: list[str]) -> Any:
    if isinstance(value, str):
        for s in typed:
            value = value.replace(s, "\u00b7")
        return value
    if isinstance(value, dict):
        return {k: _sanitise(v, typed) for k, v in value.items()}
    if isinstance(value, list):
        return [_sanitise(v, typed) for v in value]
    return value


def example_shape(conv: dict, rendered: Rendered) -> frozenset[str]:
    """The shape flags of one written example (see :data:`SHAPES`)."""
    messages = conv.get("messages") or []
    roles = [m.get("role") for m in messages]
    flags = {
        "system": "system" in roles,
        "tools": bool(conv.get("tools")),
        "tool_calls": any(m.get("tool_calls") for m in messages),
        "tool_results": "tool" in roles,
        "reasoning": any(m.get("reasoning") for m in messages),
        "multi_turn": roles.count("assistant") > 1,
        "literal_control_strings": rendered.stats.get("control_tokens_neutralised", 0) > 0,
        "truncated": rendered.stats.get("truncated_exchanges", 0) > 0,
    }
    return frozenset(k for k, v in flags.items() if v)


def tool_arguments_decoded(conv: dict) -> bool:
    return any(isinstance(c.get("arguments"), str) for m in conv.get("messages") or [] for c in m.get("tool_calls") or [])


@dataclass
class VerifyPlan:
    """Which examples of one unit are checked: the first ``first`` ones, then the first of each new shape; of
    those, the ones whose shape is in ``trusted`` (cached verdicts: sft/verdicts.py) are skipped and counted."""

    first: int
    trusted: Any = frozenset()
    seen: set = field(default_factory=set)
    taken: int = 0
    skipped: int = 0  # checks not made because a cached verdict covers their shape
    present: dict = field(default_factory=lambda: {k: 0 for k in SHAPES})  # examples per shape flag
    passed: Counter = field(default_factory=Counter)  # shape -> examples equal to the reference

    def wants(self, conv: dict, rendered: Rendered) -> bool:
        shape = example_shape(conv, rendered)
        for flag in shape:
            self.present[flag] += 1
        new = shape not in self.seen
        self.seen.add(shape)
        if self.first <= 0 or not (self.taken < self.first or new):
            return False
        self.taken += 1
        if shape in self.trusted:
            self.skipped += 1
            return False
        return True


def empty_report() -> dict:
    """The parity counters of one unit (summable): ``checked`` examples equal apply_chat_template's ids,
    ``exempt`` ones differ only by their literal control strings, ``real_differences`` were rejected
    (``on_mismatch="reject"``; by default the first stops the run). A unit that checks adds ``skipped_cached``:
    examples not checked because a cached verdict covers their shape (sft/verdicts.py)."""
    return {"checked": 0, "exempt": 0, "real_differences": 0, "mask_turns_checked": 0,
            "deliberate": {"literal_control_strings": 0, "tool_arguments_decoded": 0},
            "shapes_checked": {k: 0 for k in SHAPES}}
