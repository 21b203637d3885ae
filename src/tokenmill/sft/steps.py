"""Curation steps on conversations: the flat, document-shaped view they see, and the filtering.

A document step reads a ``Document`` batch; a conversation is shown to it as one row of
:data:`CONVERSATION_VIEW`, so heuristics, dedup signatures and decontamination run on SFT data unchanged:

``id``, ``source``, ``meta``   the conversation's own
``text``                       every message's content, in order, joined by a blank line
``prompt``                     the user turns' content, joined the same way
``response``                   the assistant turns' content (the supervised side), joined the same way
``url``, ``license``           null (conversations carry neither)

Steps may only filter here: a step that rewrites ``text`` is refused (the flat text cannot be put back
into the messages). The steps run as one cascade through :class:`tokenmill.steps.ledger.UnitLedger`, as on the
pretraining track: removed conversations are counted as filtered with the step's reason, and every
conversation's scores and verdict go into the unit's ledger part (``steps/sft/ledger/<unit>.parquet``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tokenmill.base.accounting import Stats
from tokenmill.records import DOCUMENT
from tokenmill.steps.ledger import UnitLedger

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


def filter_conversations(ledger: UnitLedger, convs: list[dict], locs: list[int], *, stats: Stats
                         ) -> tuple[list[dict], list[int]]:
    """The conversations (and their locs) every step keeps; the others counted in ``stats`` by reason, every
    one of them recorded in ``ledger``."""
    result = ledger.run(conversation_batch(convs), np.asarray(locs, dtype=np.int64), stats) if convs else None
    if result is None:
        return convs, locs
    kept = np.flatnonzero(result.ledger.column("kept").to_numpy(zero_copy_only=False)).tolist()
    return [convs[i] for i in kept], [locs[i] for i in kept]
