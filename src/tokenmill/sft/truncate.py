"""Turn-aware truncation: drop the oldest whole exchanges until a conversation fits ``max_length`` tokens.

An exchange is a user message with the assistant and tool messages that answer it. Leading system messages and
the final exchange are always kept, so the final answer and its stop token are never cut. The conversation is
re-rendered only when it is too long (a binary search over how many exchanges to drop: O(log turns) renders).
A conversation whose system messages and final exchange alone exceed ``max_length`` is rejected (``too_long``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenmill.errors import ConfigError, TemplateError
from tokenmill.sft.budget import drop_unfittable
from tokenmill.sft.render import (
    MaskPolicy,
    Rendered,
    render_conversation,
    render_conversations,
)
from tokenmill.sft.template import ChatTemplate

if TYPE_CHECKING:
    from tokenmill.tokenize.tokenizer import Tokenizer


def exchanges(messages: list[dict]) -> tuple[list[int], list[list[int]]]:
    """(indexes of leading system messages, exchanges as lists of indexes); a new exchange starts at each user."""
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    groups: list[list[int]] = []
    for i in range(head, len(messages)):
        if messages[i].get("role") == "user" or not groups:
            groups.append([])
        groups[-1].append(i)
    return list(range(head)), groups


def _without(conv: dict, dropped: int) -> dict:
    system, groups = exchanges(conv.get("messages") or [])
    keep = system + [i for g in groups[dropped:] for i in g]
    return {**conv, "messages": [conv["messages"][i] for i in keep]}


def fit_conversation(
    conv: dict,
    *,
    max_length: int,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    policy: MaskPolicy = MaskPolicy(),
) -> Rendered:
    """Render ``conv``; when over ``max_length`` tokens, drop the oldest exchanges until it fits.

    Adds ``truncated_exchanges`` and ``supervised_tokens_lost`` to the stats. Raises :class:`TemplateError`
    with reason ``too_long`` when even the system messages plus the final exchange do not fit.
    """
    _check_length(max_length)
    options = {"tokenizer": tokenizer, "template": template, "policy": policy}
    return _fit(conv, render_conversation(conv, **options), max_length=max_length, options=options)


def fit_conversations(
    convs: list[dict],
    *,
    max_length: int,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    policy: MaskPolicy = MaskPolicy(),
) -> list[Rendered | TemplateError]:
    """:func:`fit_conversation` of many conversations: one batched render, re-renders only for over-long ones.

    A conversation that cannot be rendered or fitted gets its :class:`TemplateError` in its place.
    """
    _check_length(max_length)
    options = {"tokenizer": tokenizer, "template": template, "policy": policy}
    prefit = [_prefit(conv, max_length) for conv in convs]  # sft/budget.py: refuse what cannot fit, unencoded
    ready = [p for p in prefit if not isinstance(p, TemplateError)]
    rendered = iter(render_conversations([conv for conv, _ in ready], **options))
    out: list[Rendered | TemplateError] = []
    for p in prefit:
        if isinstance(p, TemplateError):
            out.append(p)
            continue
        full = next(rendered)
        if isinstance(full, TemplateError):
            out.append(full)
            continue
        try:
            out.append(_fit(p[0], full, max_length=max_length, options=options, dropped=p[1]))
        except TemplateError as exc:
            out.append(exc)
    return out


def _prefit(conv: dict, max_length: int) -> tuple[dict, int] | TemplateError:
    try:
        return drop_unfittable(conv, max_length=max_length, exchanges=exchanges)
    except TemplateError as exc:
        return exc


def _check_length(max_length: int) -> None:
    if max_length < 1:
        raise ConfigError(f"max_length={max_length}: must be a positive number of tokens")


def _fit(conv: dict, full: Rendered, *, max_length: int, options: dict, dropped: int = 0) -> Rendered:
    """``full`` when it fits, else the render with the fewest oldest exchanges dropped that does.

    ``dropped``: exchanges already removed before rendering (they held a message that cannot fit).
    """
    full.stats.update(truncated_exchanges=dropped, supervised_tokens_lost=0)
    if len(full.ids) <= max_length:
        return full
    droppable = len(exchanges(conv.get("messages") or [])[1]) - 1
    best = render_conversation(_without(conv, droppable), **options) if droppable > 0 else full
    if droppable <= 0 or len(best.ids) > max_length:
        raise TemplateError(
            f"record {conv.get('id', '?')}: {len(best.ids)} tokens with only the system messages and the final "
            f"exchange, over max_length={max_length}; raise max_length or shorten the final exchange",
            reason="too_long",
        )
    lo, hi = 1, droppable  # invariant: `best` is the render with `hi` exchanges dropped, and it fits
    while lo < hi:
        mid = (lo + hi) // 2
        candidate = render_conversation(_without(conv, mid), **options)
        if len(candidate.ids) <= max_length:
            hi, best = mid, candidate
        else:
            lo = mid + 1
    best.stats.update(
        truncated_exchanges=hi + dropped,
        supervised_tokens_lost=max(0, full.stats["trained_tokens"] - best.stats["trained_tokens"]),
    )
    return best
