"""PackedCollator on hand-made samples with known answers."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tokenmill.loader import PackedCollator  # noqa: E402

SAMPLES = [
    {"input_ids": np.array([10, 11, 12, 20, 21]), "loss_mask": np.array([0, 1, 1, 1, 1], bool),
     "seq_lens": np.array([3, 2], np.int32)},
    {"input_ids": np.array([30, 31, 32]), "loss_mask": np.array([0, 0, 1], bool), "seq_lens": np.array([3], np.int32)},
]


def test_packed_batch_fields():
    batch = PackedCollator(pad_id=0, block_diag_mask=True, varlen_kwargs=True, pad_to=6)(SAMPLES)
    assert batch["input_ids"].tolist() == [[10, 11, 12, 20, 21, 0], [30, 31, 32, 0, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 11, 12, -100, 21, -100], [-100, -100, 32, -100, -100, -100]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0], [0, 1, 2, 0, 1, 2]]
    assert batch["cu_seq_lens_q"].dtype == torch.int32
    assert batch["cu_seq_lens_q"].tolist() == [0, 3, 5, 6, 9, 12]
    assert batch["max_length_q"] == 3
    mask = batch["attention_mask"]
    assert mask.shape == (2, 1, 6, 6) and mask.dtype == torch.float32  # additive: right on eager as on SDPA
    assert (mask[0, 0, 4] == 0).tolist() == [False, False, False, True, True, False]
    assert (mask[0, 0, 2] == 0).tolist() == [True, True, True, False, False, False]
    assert (mask[1, 0, 5] == 0).tolist() == [False, False, False, True, True, True]


def test_padding_mode_one_example_per_row_and_its_share():
    collator = PackedCollator(pad_id=0, padding=True)
    batch = collator(SAMPLES)
    assert batch["input_ids"].tolist() == [[10, 11, 12], [20, 21, 0], [30, 31, 32]]
    assert batch["labels"].tolist() == [[-100, 11, 12], [-100, 21, -100], [-100, -100, 32]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0], [1, 1, 1]]
    assert collator.padding_share == pytest.approx(1 / 9)
    packed = PackedCollator(pad_id=0, pad_to=8)
    packed(SAMPLES)
    assert packed.padding_share == pytest.approx(1 - 8 / 16)
