"""Fail-closed checks on every rendered example before it is written: what the trainer would receive wrong.

Each check finds an example that renders and encodes without an error but would train the wrong thing, or
nothing:

    no_trained_tokens     no token is trained (every trained token's loss weight is 0)
    truncated_away        turn-aware truncation (``max_length``) removed every trained token it had
    turn_without_stop     an assistant turn is trained but no end-of-turn token ends it, though text follows
                          (the model would not learn to stop there)
    render_not_round_trip the ids do not decode to the rendered text (the tokenizer normalises it: the model
                          is trained on another text than the template wrote)

By default (``on_unsafe="stop"``) the first such example stops the run with its record and reason; with
``on_unsafe="reject"`` (``--on-unsafe reject``) each is rejected with its reason and counted in the summary
(``report.unsafe``). A template without any end-of-turn token, let through with ``allow_untrained_stop``, is
not checked for ``turn_without_stop``.

Cost: one pass over the mask and one decode of the ids per example.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tokenmill.errors import TemplateError

if TYPE_CHECKING:
    from tokenmill.tokenize.tokenizer import Tokenizer

CHECKS = ("no_trained_tokens", "truncated_away", "turn_without_stop", "render_not_round_trip")
ON_UNSAFE = ("stop", "reject")


def unsafe_example(rendered: Any, tokenizer: Tokenizer, *, check_stop: bool = True) -> TemplateError | None:
    """The first check ``rendered`` fails, as a :class:`TemplateError` whose ``reason`` names it; None when none."""
    rid = rendered.id
    if not _supervised(rendered):
        if rendered.stats.get("truncated_exchanges", 0) and rendered.stats.get("supervised_tokens_lost", 0):
            return TemplateError(
                f"record {rid}: truncation to max_length dropped every trained token (the final exchange it keeps "
                "trains nothing); raise max_length or give the final assistant turn a weight", reason="truncated_away")
        return TemplateError(
            f"record {rid}: no token of this example is trained (every assistant turn is masked out or has weight "
            "0): it would add nothing but padding to the loss; remove it or give a turn a weight",
            reason="no_trained_tokens")
    if check_stop:
        turn = rendered.stats.get("turn_without_stop")
        if turn is not None:
            return TemplateError(
                f"record {rid}: assistant message {turn} is trained but no end-of-turn token ends it before the next "
                "message: the model would not learn to stop there; use a chat template that ends every assistant "
                "turn with a control token", reason="turn_without_stop")
    decoded = tokenizer.decode(rendered.ids)
    if decoded != rendered.text:
        at = _first_difference(decoded, rendered.text)
        return TemplateError(
            f"record {rid}: the ids do not decode to the rendered text (they part at character {at}: "
            f"{rendered.text[at:at + 20]!r} rendered, {decoded[at:at + 20]!r} decoded); the tokenizer normalises "
            "the text, so the model would be trained on another text than the template wrote",
            reason="render_not_round_trip")
    return None


def _supervised(rendered: Any) -> bool:
    mask = np.asarray(rendered.mask, dtype=bool)
    if rendered.weights is None:
        return bool(mask.any())
    return bool((mask & (np.asarray(rendered.weights) > 0)).any())


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def unsafe_line(counts: dict[str, int]) -> str:
    """The summary line of the examples the checks rejected, by reason ("" when none)."""
    if not counts:
        return ""
    total = sum(counts.values())
    return (f"  fail-closed checks rejected {total:,} example{'s' if total != 1 else ''}: "
            + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())))
