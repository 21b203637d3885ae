"""``PackedCollator``: packed samples -> tensors for a causal LM that shifts labels itself (HF style).

Packed mode (default). Each sample is one row, right-padded to ``pad_to`` (or the longest row):
``input_ids``; ``labels`` = ``input_ids`` where trained, -100 on untrained tokens, on the first token of
every packed document (it would be predicted from the previous document) and on padding;
``position_ids`` restarting at 0 for every document and for the padding tail. When a sample carries
``loss_weights`` (shards written with per-message weights), ``loss_weights`` (float32, aligned with
``labels``: 0 wherever the label is -100, the message's weight on trained tokens, 1.0 for samples without
weights) multiplies the per-token loss, e.g. ``(ce * w).sum() / w.sum()``; the model's label shift applies
to it the same way. Optional:
``cu_seq_lens_q/k`` (int32, over the flattened ``B*L`` tokens, padding tails as their own segments) and
``max_length_q/k`` for FlashAttention varlen kernels (the names transformers reads), and a block-diagonal
causal ``attention_mask`` for backends without varlen: ``mask="bool"`` (``[B, 1, L, L]``, True = may attend:
SDPA only), ``"additive"`` (float32, 0 or the dtype's minimum: eager and SDPA; eager adds a bool mask to its
scores and so leaks; ``block_diag_mask=True`` is this form) or ``"flex"`` (a flex-attention ``BlockMask``); see
:mod:`tokenmill.loader.masks`.

Padding mode (``padding=True``), for comparison: every document of every sample gets its own row,
padded to the longest, with a 0/1 ``attention_mask``. ``padding_share`` tells the share of pad slots.
"""

from __future__ import annotations

import numpy as np

from tokenmill._extras import require
from tokenmill.errors import ConfigError
from tokenmill.loader import masks

IGNORE = -100


class PackedCollator:
    """Callable for ``DataLoader(collate_fn=...)`` over :class:`PackedDataset` samples."""

    def __init__(self, *, pad_id: int, block_diag_mask: bool = False, padding: bool = False,
                 pad_to: int | None = None, varlen_kwargs: bool = False, mask: str | None = None):
        if block_diag_mask and mask is not None:
            raise ConfigError(f"block_diag_mask=True is mask='additive'; it cannot be combined with mask={mask!r}")
        self.pad_id, self.padding = int(pad_id), padding
        # the additive form: right on every attention backend (a bool mask lets eager's examples see each other)
        self.mask = masks.check_form(mask) or ("additive" if block_diag_mask else None)
        self.pad_to, self.varlen_kwargs = pad_to, varlen_kwargs
        self.tokens = 0  # real tokens collated so far (this process)
        self.slots = 0  # token slots collated so far, padding included

    @property
    def padding_share(self) -> float:
        """Share of pad slots among all slots collated by this collator so far."""
        return 1.0 - self.tokens / self.slots if self.slots else 0.0

    def __call__(self, samples: list[dict]) -> dict:
        torch = require("torch", "torch", "build training batches")
        weighted = any("loss_weights" in s for s in samples)
        rows = _split_rows(samples) if self.padding else [_row(s) for s in samples]
        width = max([self.pad_to or 0] + [r[0].size for r in rows])
        arrays = _pad_rows(rows, width, self.pad_id)
        self.tokens += sum(r[0].size for r in rows)
        self.slots += width * len(rows)
        keys = ("input_ids", "labels", "loss_weights") if weighted else ("input_ids", "labels")
        batch = {k: torch.from_numpy(arrays[k]) for k in keys}
        if self.padding:
            batch["attention_mask"] = torch.from_numpy(arrays["real"].astype(np.int64))
            return batch
        batch["position_ids"] = torch.from_numpy(arrays["position_ids"])
        if self.varlen_kwargs:
            lens = arrays["segment_lens"]
            cu = torch.from_numpy(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
            batch.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=int(lens.max()), max_length_k=int(lens.max()))
        if self.mask:
            batch["attention_mask"] = masks.build(self.mask, arrays["segments"])
        return batch


def _row(sample: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ids, mask, lengths of the document pieces, weights: the sample's own or its mask as 0.0/1.0)."""
    _check_keys(sample)
    ids = np.asarray(sample["input_ids"], np.int64)
    mask = np.asarray(sample["loss_mask"], np.bool_)
    lens = np.asarray(sample.get("seq_lens", [ids.size]), np.int64)
    weights = sample.get("loss_weights")
    weights = mask.astype(np.float32) if weights is None else np.asarray(weights, np.float32)
    return ids, mask, lens, weights


def _check_keys(sample) -> None:
    """A sample stripped of ``loss_mask``/``seq_lens`` (HF ``Trainer`` drops the columns its model's
    ``forward`` does not name) would train every token of one long document: refuse it, naming the fix."""
    missing = [k for k in ("input_ids", "loss_mask") if not isinstance(sample, dict) or k not in sample]
    if not missing:
        return
    keys = sorted(sample) if isinstance(sample, dict) else type(sample).__name__
    raise ConfigError(
        f"a sample given to PackedCollator lacks {', '.join(map(repr, missing))} (it has {keys}). With the "
        "transformers Trainer or TRL, pass remove_unused_columns=False in TrainingArguments / SFTConfig: "
        "by default they drop every column the model's forward() does not take before collating")


def _split_rows(samples: list[dict]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """One row per document piece (padding mode)."""
    rows = []
    for ids, mask, lens, weights in map(_row, samples):
        cuts = np.cumsum(lens)[:-1]
        pieces = zip(np.split(ids, cuts), np.split(mask, cuts), np.split(weights, cuts))
        rows += [(i, m, np.array([i.size]), w) for i, m, w in pieces]
    return rows


def _pad_rows(rows, width: int, pad_id: int) -> dict:
    """Numpy arrays of the batch: ids, labels, positions, segment ids, real-token flags, segment lengths."""
    b = len(rows)
    out = {"input_ids": np.full((b, width), pad_id, np.int64), "labels": np.full((b, width), IGNORE, np.int64),
           "position_ids": np.zeros((b, width), np.int64), "segments": np.zeros((b, width), np.int64),
           "real": np.zeros((b, width), np.bool_), "loss_weights": np.zeros((b, width), np.float32)}
    segment_lens = []
    for r, (ids, mask, lens, weights) in enumerate(rows):
        n, tail = ids.size, width - ids.size
        seg_lens = np.concatenate([lens, [tail]]) if tail else lens
        firsts = np.concatenate([[0], np.cumsum(seg_lens)[:-1]])
        segment = np.repeat(np.arange(seg_lens.size), seg_lens)
        out["input_ids"][r, :n] = ids
        out["labels"][r, :n] = np.where(mask, ids, IGNORE)
        out["labels"][r, firsts[firsts < n]] = IGNORE
        out["loss_weights"][r, :n] = np.where(out["labels"][r, :n] == IGNORE, 0.0, weights)
        out["position_ids"][r] = np.arange(width) - firsts[segment]
        out["segments"][r] = segment
        out["real"][r, :n] = True
        segment_lens.append(seg_lens)
    out["segment_lens"] = np.concatenate(segment_lens) if segment_lens else np.zeros(0, np.int64)
    return out

