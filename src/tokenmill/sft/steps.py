"""Curation steps on conversations: the flat, document-shaped view they see, and the filtering.

A document step reads a ``Document`` batch; a conversation is shown to it as one row of
:data:`CONVERSATION_VIEW`, so heuristics, dedup signatures and decontamination run on SFT data unchanged:

``id``, ``source``, ``meta``   the conversation's own
``text``                       every message's content, in order, joined by a blank line
``prompt``                     the user turns' content, joined the same way
``response``                   the assistant turns' content (the supervised side), joined the same way
``url``, ``license``           null (conversations carry neither)

Steps may only filter here: a step that rewrites ``text`` is refused (the flat text cannot be put back
into the messages). Removed conversations are counted as filtered with the step's reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tokenmill.base.accounting import Stats
from tokenmill.curate.inline import apply_steps
from tokenmill.records import DOCUMENT

SEP = "\n\n"
CONVERSATION_VIEW = DOCUMENT.append(pa.field("prompt", pa.large_string())).append(
    pa.field("response", pa.large_string()))


def _joined(messages: list[dict], roles: tuple[str, ...] | None) -> str:
    return SEP.join(m["content"] for m in messages
                    if m.get("content") and (roles is None or m.get("role") in roles))


def conversation_batch(convs: list[dict]) -> pa.RecordBatch:
    """The flat view of canonical conversations (see the module docstring), one row each, in order."""
    cols: dict[str, list] = {name: [] for name in CONVERSATION_VIEW.names}
    for c in convs:
        msgs = c.get("messages") or []
        cols["id"].append(c["id"])
        cols["text"].append(_joined(msgs, None))
        cols["source"].append(c["source"])
        cols["url"].append(None)
        cols["license"].append(None)
        cols["meta"].append(c.get("meta"))
        cols["prompt"].append(_joined(msgs, ("user",)))
        cols["response"].append(_joined(msgs, ("assistant",)))
    return pa.RecordBatch.from_pydict(cols, schema=CONVERSATION_VIEW)


def filter_conversations(steps: Sequence[Any], convs: list[dict], locs: list[int], *, stats: Stats,
                         seconds: Counter) -> tuple[list[dict], list[int]]:
    """The conversations (and their locs) every step keeps; the others counted in ``stats`` by reason."""
    if not convs:
        return convs, locs
    applied = apply_steps(steps, conversation_batch(convs), keep_rows=True, rewrite=False)
    for reason, n in applied.filtered.items():
        stats.filter(reason, n)
    stats.extra.update(applied.counts)
    seconds.update(applied.seconds)
    kept = [int(i) for i in applied.rows]
    return [convs[i] for i in kept], [locs[i] for i in kept]
