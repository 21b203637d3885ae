"""Collators for preference pairs (DPO and its kin): TRL's padded batch, or packed prefix-shared rows.

Input: the pair dicts ``PreferenceDataset`` yields, ``{"pair_id", "prompt_ids", "chosen_ids",
"rejected_ids", "chosen_mask", "rejected_mask"}`` (ids after the prompt; masks 1 = trained), optionally
``ref_chosen_logps``/``ref_rejected_logps`` (passed through).

``PaddedPairCollator`` gives what TRL 1.x's ``DataCollatorForPreference`` gives and ``DPOTrainer`` reads:
``input_ids``, ``attention_mask``, ``completion_mask`` (``[2B, L]``, right-padded; rows ``:B`` are
prompt+chosen, ``B:`` prompt+rejected). Every prompt is computed twice and the shorter completion padded.

``PackedPairCollator`` lays every pair out once as prompt, chosen, rejected, several pairs per row of
``seq_len`` (best-fit-decreasing within the batch). ``position_ids`` run on through the prompt and chosen,
and restart at the prompt's length for the rejected completion, which attends to the prompt and not to the
chosen one (the rule of :mod:`tokenmill.loader.masks`: ``segments`` = pair, ``branches`` = 0 prompt, 1
chosen, 2 rejected). So each row costs ``P + C + R`` slots per pair against ``2 * max(P + C, P + R)`` padded.
The last prompt token predicts the first token of both completions; a completion token is scored by
``logit_index`` (its predicting position in the flattened ``B*L`` logits), ``target_ids`` and
``completion_index`` (``2 * pair + 0`` chosen, ``+ 1`` rejected, pairs in the order given), trained tokens
only. :func:`packed_logps` turns logits into per-completion sums; :func:`padded_logps` does the same for
the padded batch, and :func:`dpo_loss` is the sigmoid DPO loss on either.
"""

from __future__ import annotations

import numpy as np

from tokenmill._extras import require
from tokenmill.errors import ConfigError
from tokenmill.loader import masks
from tokenmill.pack import best_fit_decreasing

PROMPT, CHOSEN, REJECTED = 0, 1, 2
REF_KEYS = ("ref_chosen_logps", "ref_rejected_logps")


class PaddedPairCollator:
    """TRL's preference batch (keys and layout of ``trl.trainer.dpo_trainer.DataCollatorForPreference``)."""

    def __init__(self, *, pad_id: int, pad_to_multiple_of: int | None = None):
        self.pad_id, self.multiple = int(pad_id), pad_to_multiple_of

    def __call__(self, pairs: list[dict]) -> dict:
        torch = require("torch", "torch", "build preference batches")
        pairs = [_pair(p) for p in pairs]
        rows = [_completion_row(p, "chosen") for p in pairs] + [_completion_row(p, "rejected") for p in pairs]
        width = max(ids.size for ids, _ in rows)
        if self.multiple:
            width = -(-width // self.multiple) * self.multiple
        ids = np.full((len(rows), width), self.pad_id, np.int64)
        real, trained = np.zeros((len(rows), width), np.int64), np.zeros((len(rows), width), np.int64)
        for r, (row_ids, row_mask) in enumerate(rows):
            ids[r, :row_ids.size], real[r, :row_ids.size], trained[r, :row_ids.size] = row_ids, 1, row_mask
        batch = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(real),
                 "completion_mask": torch.from_numpy(trained)}
        return {**batch, **_refs(torch, pairs)}


class PackedPairCollator:
    """Pairs packed prompt, chosen, rejected into rows of ``seq_len``; the prompt is computed once per pair.

    ``mask``: ``"additive"`` (eager and SDPA), ``"bool"`` (SDPA) or ``"flex"`` (a ``BlockMask``); see
    :mod:`tokenmill.loader.masks`. A pair longer than ``seq_len`` is a ``ConfigError`` naming it.
    """

    def __init__(self, *, pad_id: int, seq_len: int, mask: str = "additive"):
        if masks.check_form(mask) is None:
            raise ConfigError("PackedPairCollator needs a mask: 'additive', 'bool' or 'flex'")
        self.pad_id, self.seq_len, self.mask = int(pad_id), int(seq_len), mask
        self.tokens = self.slots = 0

    def __call__(self, pairs: list[dict]) -> dict:
        torch = require("torch", "torch", "build preference batches")
        pairs = [_pair(p) for p in pairs]
        rows = self._rows(pairs)
        arrays = _lay_out(pairs, rows, self.seq_len, self.pad_id)
        self.tokens += sum(_length(p) for p in pairs)
        self.slots += len(rows) * self.seq_len
        batch = {k: torch.from_numpy(arrays[k]) for k in ("input_ids", "position_ids", "logit_index",
                                                           "target_ids", "completion_index", "pair_ids")}
        batch["attention_mask"] = masks.build(self.mask, arrays["segments"], arrays["branches"])
        return {**batch, **_refs(torch, pairs)}

    def _rows(self, pairs: list[dict]) -> list[np.ndarray]:
        """Pair indices of every row, best-fit-decreasing on ``P + C + R``."""
        lengths = np.array([_length(p) for p in pairs], np.int64)
        too_long = np.flatnonzero(lengths > self.seq_len)
        if too_long.size:
            p = pairs[int(too_long[0])]
            raise ConfigError(
                f"preference pair {p['pair_id']} takes {lengths[too_long[0]]} tokens (prompt, chosen and rejected) "
                f"and seq_len is {self.seq_len}: raise seq_len, or write the pairs with a smaller --max-length")
        plan = best_fit_decreasing(lengths, self.seq_len)
        return [np.asarray(plan.pack(k)[0]) for k in range(plan.n_packs)]


def _pair(p) -> dict:
    """The pair's arrays (int64 ids, bool masks), checked against the pair contract."""
    missing = [k for k in ("pair_id", "prompt_ids", "chosen_ids", "rejected_ids") if not isinstance(p, dict) or k not in p]
    if missing:
        have = sorted(p) if isinstance(p, dict) else type(p).__name__
        raise ConfigError(f"a preference pair lacks {', '.join(map(repr, missing))} (it has {have}); give the "
                          "collator PreferenceDataset items, and remove_unused_columns=False to a Trainer")
    out = {"pair_id": int(p["pair_id"]), "prompt_ids": np.asarray(p["prompt_ids"], np.int64)}
    for side in ("chosen", "rejected"):
        ids = np.asarray(p[f"{side}_ids"], np.int64)
        mask = np.asarray(p.get(f"{side}_mask", np.ones(ids.size)), np.bool_)
        if mask.size != ids.size or ids.size == 0 or out["prompt_ids"].size == 0:
            raise ConfigError(f"preference pair {out['pair_id']}: the prompt and {side}_ids must be non-empty and "
                              f"{side}_mask as long as {side}_ids ({mask.size} vs {ids.size})")
        out[f"{side}_ids"], out[f"{side}_mask"] = ids, mask
    return {**out, **{k: float(p[k]) for k in REF_KEYS if k in p}}


def _length(p: dict) -> int:
    return p["prompt_ids"].size + p["chosen_ids"].size + p["rejected_ids"].size


def _completion_row(p: dict, side: str) -> tuple[np.ndarray, np.ndarray]:
    """Prompt + one completion, and its completion mask (0 on the prompt)."""
    mask = np.concatenate([np.zeros(p["prompt_ids"].size, np.int64), p[f"{side}_mask"].astype(np.int64)])
    return np.concatenate([p["prompt_ids"], p[f"{side}_ids"]]), mask


def _refs(torch, pairs: list[dict]) -> dict:
    """Reference log-probs carried by the pairs, in pair order, as TRL passes them."""
    return {k: torch.tensor([p[k] for p in pairs]) for k in REF_KEYS if all(k in p for p in pairs)}


def _lay_out(pairs: list[dict], rows: list[np.ndarray], width: int, pad_id: int) -> dict:
    """Row arrays (ids, positions, segments, branches) and the scoring index of every trained token."""
    shape = (len(rows), width)
    out = {"input_ids": np.full(shape, pad_id, np.int64), "position_ids": np.zeros(shape, np.int64),
           "segments": np.zeros(shape, np.int64), "branches": np.zeros(shape, np.int64)}
    scores = []
    for r, members in enumerate(rows):
        start = 0
        for slot, i in enumerate(members):
            scores.append(_place(out, pairs[int(i)], int(i), r, start, slot + 1, width))
            start += _length(pairs[int(i)])
        out["segments"][r, start:] = len(members) + 1  # the padding tail: a segment of its own
        out["position_ids"][r, start:] = np.arange(width - start)
    index, targets, completion = (np.concatenate(parts) for parts in zip(*scores)) if scores else ([],) * 3
    out.update(logit_index=np.asarray(index, np.int64), target_ids=np.asarray(targets, np.int64),
               completion_index=np.asarray(completion, np.int64),
               pair_ids=np.array([p["pair_id"] for p in pairs], np.int64))
    return out


def _place(out: dict, p: dict, i: int, r: int, start: int, segment: int, width: int):
    """Write pair ``i`` at ``start`` of row ``r``; (flat logit index, target id, completion) per trained token."""
    n_prompt = p["prompt_ids"].size
    last_prompt = r * width + start + n_prompt - 1
    pos, parts = start, []
    for branch, side in ((PROMPT, "prompt"), (CHOSEN, "chosen"), (REJECTED, "rejected")):
        ids = p[f"{side}_ids"]
        span = slice(pos, pos + ids.size)
        out["input_ids"][r, span], out["segments"][r, span], out["branches"][r, span] = ids, segment, branch
        out["position_ids"][r, span] = np.arange(ids.size) + (0 if branch == PROMPT else n_prompt)
        if branch != PROMPT:
            # token k is predicted at the previous token of its own completion, token 0 at the prompt's end
            predictor = np.concatenate([[last_prompt], r * width + pos + np.arange(ids.size - 1)])
            keep = p[f"{side}_mask"]
            parts.append((predictor[keep], ids[keep], np.full(int(keep.sum()), 2 * i + branch - 1)))
        pos += ids.size
    return tuple(np.concatenate(x) for x in zip(*parts))


def packed_logps(logits, batch):
    """(chosen, rejected) sums of token log-probs per pair, in pair order, from a packed batch's logits."""
    torch = require("torch", "torch", "score preference batches")
    flat = logits.reshape(-1, logits.shape[-1])[batch["logit_index"]].float()
    token = torch.log_softmax(flat, dim=-1).gather(1, batch["target_ids"][:, None])[:, 0]
    sums = torch.zeros(2 * batch["pair_ids"].numel(), dtype=token.dtype, device=token.device)
    sums = sums.index_add(0, batch["completion_index"], token)
    return sums[0::2], sums[1::2]


def padded_logps(logits, batch):
    """(chosen, rejected) sums of token log-probs per pair from a padded (TRL-layout) batch's logits."""
    torch = require("torch", "torch", "score preference batches")
    targets = batch["input_ids"][:, 1:]
    token = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(2, targets[..., None])[..., 0]
    sums = (token * batch["completion_mask"][:, 1:]).sum(dim=1)
    half = sums.shape[0] // 2
    return sums[:half], sums[half:]


def dpo_loss(chosen, rejected, ref_chosen, ref_rejected, *, beta: float = 0.1):
    """Sigmoid DPO loss (Rafailov et al. 2023), mean over pairs: ``-log sigmoid(beta * (margin - ref margin))``."""
    torch = require("torch", "torch", "compute the DPO loss")
    return -torch.nn.functional.logsigmoid(beta * ((chosen - ref_chosen) - (rejected - ref_rejected))).mean()
