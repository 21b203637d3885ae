"""A :class:`~tokenmill.pref.inputs.Pair` into TRL's tokenized columns, as ``DPOTrainer._prepare_dataset`` makes
them in TRL 1.x, with the SFT track's loss mask on each completion.

TRL's rule, followed exactly:

- conversational pairs: ``prompt_ids`` is the prompt rendered with the generation prompt; ``prompt+chosen`` and
  ``prompt+rejected`` are rendered whole (no generation prompt); standard (text) pairs: the prompt and
  ``prompt + completion`` tokenized as the tokenizer's ``__call__`` does (its BOS when it adds one, special-token
  strings as control tokens), the tokenizer's EOS appended as text to a completion that does not end with it;
- the completion starts where the tokenized prompt and prompt+completion diverge: ``prompt_len`` is the shorter
  common prefix of the two sides, ``prompt_ids = prompt_ids[:prompt_len]`` and each completion is the rest of
  its side. A template that renders the prompt differently alone (an empty thought block in the generation
  prompt, tokens merging across the boundary) leaves the prompt's end out of the sequence: TRL warns once,
  tokenmill counts such pairs (``prompt_not_prefix``) and reports the run's first example once.

Each side is rendered by the SFT track's renderer (:func:`tokenmill.sft.render.render_conversations`: one render
with sentinels, message texts tokenized as literal spans), so its mask is the SFT rule: the assistant's output
through the end-of-turn mark is trained, role headers are not; the completion's mask is the side's mask after
``prompt_len``. Prompt tokens are never trained: the prompt's messages are rendered with weight 0, so an
assistant turn of the prompt's history stays untrained even where the split falls before it. Text completions
are trained whole (EOS included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tokenmill.errors import TemplateError
from tokenmill.pref.inputs import Pair
from tokenmill.sft.budget import render_session
from tokenmill.sft.render import MaskPolicy, Rendered, hf_messages, render_conversations, shape_of
from tokenmill.sft.spans import cut_sentinels, mark_messages
from tokenmill.sft.template import ChatTemplate, render_template, special_token_kwargs
from tokenmill.sft.validate import explain_conversation

if TYPE_CHECKING:
    from tokenmill.tokenize.tokenizer import Tokenizer


@dataclass
class Tokenized:
    """One pair (or KTO record: ``rejected_ids`` None) as TRL's columns, with a loss mask per completion."""

    id: str
    prompt_ids: np.ndarray
    chosen_ids: np.ndarray
    chosen_mask: np.ndarray  # uint8, 1 = trained
    rejected_ids: np.ndarray | None = None
    rejected_mask: np.ndarray | None = None
    prompt_cut: str = ""  # the prompt's end left out where the sides diverge before it ("" when none is)
    truncated: bool = False  # --max-length cut the prompt's start or a completion's end


class PairProblem(Exception):
    """A pair that cannot be tokenized: a reject reason and its sentence."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def common_prefix_length(a: np.ndarray, b: np.ndarray) -> int:
    """Leading tokens ``a`` and ``b`` share (TRL's ``common_prefix_length``)."""
    n = min(len(a), len(b))
    differ = np.nonzero(np.asarray(a[:n]) != np.asarray(b[:n]))[0]
    return int(differ[0]) if len(differ) else n


def tokenize_pairs(pairs: list[Pair], *, tokenizer: Tokenizer, template: ChatTemplate, policy: MaskPolicy
                   ) -> list[Tokenized | PairProblem]:
    """Every pair tokenized (its :class:`PairProblem` in its place when it cannot be); the chat pairs' sides
    rendered in one batched call."""
    chat = [p for p in pairs if p.form == "chat"]
    sides = _render_sides(chat, tokenizer=tokenizer, template=template, policy=policy)
    out: list[Tokenized | PairProblem] = []
    with render_session():
        for pair in pairs:
            try:
                out.append(_chat(pair, sides, tokenizer, template, policy) if pair.form == "chat"
                           else _text(pair, tokenizer))
            except PairProblem as problem:
                out.append(problem)
    return out


def _render_sides(pairs: list[Pair], *, tokenizer: Tokenizer, template: ChatTemplate, policy: MaskPolicy) -> dict:
    """``(pair id, side) -> Rendered | PairProblem`` for each side of each chat pair: prompt + completion whole."""
    convs, keys, out = [], [], {}
    for pair in pairs:
        for side in ("chosen", "rejected") if pair.paired else ("chosen",):
            untrained = [{**m, "weight": 0} for m in pair.prompt]  # the prompt's own assistant turns: context only
            conv = {"id": pair.id, "messages": [*untrained, *getattr(pair, side)], "tools": pair.tools,
                    "source": "pref", "meta": None}
            problem = explain_conversation(conv, allow_consecutive=False)
            if problem is not None:
                out[(pair.id, side)] = PairProblem(problem[0], f"{side} side: {problem[1]}")
                continue
            convs.append(conv)
            keys.append((pair.id, side))
    rendered = render_conversations(convs, tokenizer=tokenizer, template=template, policy=policy)
    for key, r in zip(keys, rendered):
        out[key] = PairProblem(getattr(r, "reason", "template_error"), f"{key[1]} side: {r}") \
            if isinstance(r, TemplateError) else r
    return out


def render_prompt(pair: Pair, *, tokenizer: Tokenizer, template: ChatTemplate, policy: MaskPolicy) -> np.ndarray:
    """The prompt's ids rendered with the generation prompt, message texts tokenized as literal spans (as the
    SFT renderer tokenizes them)."""
    conv = {"id": pair.id, "messages": pair.prompt, "tools": pair.tools}
    messages, tools, _ = hf_messages(conv, renders_reasoning=shape_of(template, tokenizer).renders_reasoning,
                                     reasoning_policy=policy.reasoning_policy)
    marked = mark_messages(messages, record_id=pair.id)
    text, _ = render_template(template, marked, tools=tools, special_tokens=special_token_kwargs(tokenizer),
                              record_id=pair.id, generation_prompt=True)
    cut = cut_sentinels(text)
    return np.asarray(tokenizer.encode_rendered(cut.text, literal_spans=cut.literal())[0], dtype=np.uint32)


def _chat(pair: Pair, sides: dict, tokenizer: Tokenizer, template: ChatTemplate, policy: MaskPolicy) -> Tokenized:
    rendered: list[Rendered] = []
    for side in ("chosen", "rejected") if pair.paired else ("chosen",):
        r = sides[(pair.id, side)]
        if isinstance(r, PairProblem):
            raise r
        rendered.append(r)
    try:
        prompt = render_prompt(pair, tokenizer=tokenizer, template=template, policy=policy)
    except TemplateError as exc:
        raise PairProblem(getattr(exc, "reason", "template_error"), f"prompt: {exc}") from None
    return split(pair.id, prompt, [(r.ids, r.mask) for r in rendered], tokenizer)


def _text(pair: Pair, tokenizer: Tokenizer) -> Tokenized:
    """TRL's standard format: plain texts, the EOS appended as text to each completion that lacks it."""
    eos = tokenizer.eos_token or ""
    sides = [pair.chosen] + ([pair.rejected] if pair.paired else [])
    prompt = encode_text(pair.prompt, tokenizer)
    encoded = []
    for completion in sides:
        ids = encode_text(pair.prompt + (completion if completion.endswith(eos) else completion + eos), tokenizer)
        encoded.append((ids, np.ones(len(ids), dtype=bool)))
    return split(pair.id, prompt, encoded, tokenizer)


def encode_text(text: str, tokenizer: Tokenizer) -> np.ndarray:
    """``tokenizer(text=text)["input_ids"]`` of transformers: the BOS when the tokenizer adds one, special-token
    strings as their control tokens."""
    ids = np.asarray(tokenizer.encode_rendered(text)[0], dtype=np.uint32)
    if getattr(tokenizer, "add_bos", False) and tokenizer.bos_id is not None:
        ids = np.concatenate([np.array([tokenizer.bos_id], dtype=np.uint32), ids])
    return ids


def split(rid: str, prompt: np.ndarray, sides: list[tuple[np.ndarray, np.ndarray]], tokenizer: Tokenizer) -> Tokenized:
    """TRL's split at divergence: the prompt is the shorter common prefix; each completion the rest of its side."""
    prompt_len = min(common_prefix_length(prompt, ids) for ids, _ in sides)
    cut = tokenizer.decode(prompt[prompt_len:].tolist()) if prompt_len < len(prompt) else ""
    parts = [(ids[prompt_len:].astype(np.uint32), mask[prompt_len:].astype(np.uint8)) for ids, mask in sides]
    rejected = parts[1] if len(parts) > 1 else (None, None)
    return Tokenized(rid, prompt[:prompt_len].astype(np.uint32), parts[0][0], parts[0][1], rejected[0], rejected[1],
                     prompt_cut=cut)
