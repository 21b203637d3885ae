"""Proof that written ids are the ids ``transformers``' ``apply_chat_template`` gives for the same conversation."""

from __future__ import annotations

from typing import Any

from tokenmill.errors import ParityError
from tokenmill.sft.render import Rendered
from tokenmill.sft.template import ChatTemplate


def check_parity(conv: dict, rendered: Rendered, hf_tokenizer: Any, template: ChatTemplate) -> str | None:
    """Compare ``rendered.ids`` with ``hf_tokenizer.apply_chat_template`` on the same messages and tools.

    Returns None when they match, or a note when the conversation is exempt (its literal control tokens were
    neutralised, which ``apply_chat_template`` does not do). Raises :class:`ParityError` naming the record and
    the first differing position on a mismatch.
    """
    rid = conv.get("id", rendered.id)
    neutralised = rendered.stats.get("control_tokens_neutralised", 0)
    if neutralised:
        return f"record {rid}: exempt from parity, {neutralised} literal control token(s) were neutralised"
    want = list(
        hf_tokenizer.apply_chat_template(
            rendered.messages, tools=rendered.tools, chat_template=template.source, tokenize=True,
            add_generation_prompt=False, return_dict=False,
        )
    )
    got = [int(i) for i in rendered.ids]
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
