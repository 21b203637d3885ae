"""``tokenmill audit`` and ``tokenmill stats`` of a ``tokenmill pref`` output: pairs, not documents.

The audit shows ``n`` pairs spread over the set, each as its prompt (never trained) and then its two completions
side by side, chosen on the left and rejected on the right, the trained spans marked as in every audit
(``[[...]]``, or green on a terminal). The stats count pairs (and KTO records), the tokens of prompts and of each
side, and the share of tokens saved by storing each pair's prompt once instead of once per completion.
"""

from __future__ import annotations

import textwrap
from itertools import zip_longest

import numpy as np

from tokenmill.shards.pairs import _index

COLUMN = 60  # characters per side of a side-by-side pair


def pair_examples(shards, tok, n: int, limit: int, example) -> list[dict]:
    """``n`` pairs spread evenly, each ``{"id", "prompt", "chosen", "rejected"}`` of audit examples (``example``:
    :func:`tokenmill.shards.audit._example`, one decoded document with its trained runs)."""
    records, starts, kinds = _index(shards)
    picks = sorted({int(i) for i in np.linspace(0, len(starts) - 1, min(n, len(starts))).round()}) if n > 0 else []
    out = []
    for i in picks:
        k = int(starts[i])
        sides = ("prompt", "chosen", "rejected") if kinds[i] == "pair" else ("prompt", kinds[i])
        out.append({"pair": i, "id": records[i], **{side: example(shards, k + j, tok, limit)
                                                     for j, side in enumerate(sides)}})
    return out


def render_pairs(pairs: list[dict], text) -> list[str]:
    """The pairs as text: the prompt, then chosen | rejected in two columns (``text(example)``: its marked text)."""
    lines = []
    for pair in pairs:
        sides = [s for s in ("chosen", "rejected", "desirable", "undesirable") if s in pair]
        prompt = pair["prompt"]
        lines += [f"--- pair #{pair['pair']}  id={pair['id']}  source={prompt['source']}",
                  f"prompt ({prompt['tokens']:,} tokens, untrained):", text(prompt)]
        heads = [f"{s} ({pair[s]['tokens']:,} tokens, {pair[s]['trained']:,} trained)" for s in sides]
        columns = [_wrapped(text(pair[s])) for s in sides]
        lines.append(" | ".join(h.ljust(COLUMN) for h in heads).rstrip())
        for row in zip_longest(*columns, fillvalue=""):
            lines.append(" | ".join(cell.ljust(COLUMN) for cell in row).rstrip())
        lines.append("")
    return lines


def _wrapped(text: str) -> list[str]:
    return [piece for line in text.splitlines() or [""] for piece in textwrap.wrap(line, COLUMN) or [""]]


def prompt_documents(shards) -> np.ndarray:
    """A flag per document: True for each pair's prompt (never trained, by design)."""
    _, starts, _ = _index(shards)
    flags = np.zeros(shards.n_docs, dtype=bool)
    flags[starts] = True
    return flags


def pair_stats(shards) -> dict:
    """Pairs, KTO records, tokens of prompts and of each side, and the share the prompt stored once saves."""
    _, starts, kinds = _index(shards)
    lengths = np.asarray(shards.lengths, dtype=np.int64)
    paired = np.array([k == "pair" for k in kinds], dtype=bool)
    prompt = lengths[starts] if len(starts) else np.zeros(0, np.int64)
    chosen = lengths[starts + 1] if len(starts) else np.zeros(0, np.int64)
    rejected = lengths[starts[paired] + 2] if paired.any() else np.zeros(0, np.int64)
    stored = int(lengths.sum())
    twice = stored + int(prompt[paired].sum())
    return {"pairs": int(paired.sum()), "unpaired_records": int((~paired).sum()),
            "prompt_tokens": int(prompt.sum()), "chosen_tokens": int(chosen[paired].sum()),
            "rejected_tokens": int(rejected.sum()), "completion_tokens_unpaired": int(chosen[~paired].sum()),
            "prompt_stored_once_saved_share": 1 - stored / twice if twice else 0.0}
