"""From `tokenmill pref` to a DPO step: the shards read by PreferenceDataset go into both pair collators, and
each completion's summed log-probabilities from the packed prefix-shared rows equal the padded pairs' (a tiny
random Llama over the default tokenizer's vocabulary, SDPA, fp32)."""

from __future__ import annotations

import numpy as np
import prefkit as pk
import pytest

from tokenmill.job.options import JobOptions
from tokenmill.loader import PackedPairCollator, PaddedPairCollator, PreferenceDataset
from tokenmill.loader.pairs import packed_logps, padded_logps
from tokenmill.pref.run import run_pref

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _model(vocab: int, pad: int):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                      pad_token_id=pad, initializer_range=0.2, attn_implementation="sdpa")
    return transformers.LlamaForCausalLM(config).eval()


def test_pref_shards_feed_both_collators_and_the_paths_agree(tmp_path):
    src = tmp_path / "pairs.jsonl"
    pk.write_pairs(src, 8, bad=False)
    run_pref([str(src)], out=tmp_path / "out", tokenizer="default", options=JobOptions(workers=1, no_progress=True))
    data = PreferenceDataset(tmp_path / "out")
    pairs = [data[i] for i in range(len(data))]
    assert len(pairs) == 8 and all(p["chosen_mask"].any() and p["rejected_mask"].any() for p in pairs)
    pad = int(data.shards.pad_id if data.shards.pad_id is not None else data.shards.eos_id)
    model = _model(int(data.shards.vocab_size), pad)
    padded = PaddedPairCollator(pad_id=pad)(pairs)
    width = max(p["prompt_ids"].size + p["chosen_ids"].size + p["rejected_ids"].size for p in pairs)
    packed = PackedPairCollator(pad_id=pad, seq_len=2 * width, mask="additive")(pairs)
    assert packed["input_ids"].shape[0] < len(pairs)  # several pairs share a row
    with torch.no_grad():
        want = padded_logps(model(input_ids=padded["input_ids"], attention_mask=padded["attention_mask"]).logits, padded)
        got = packed_logps(model(**{k: packed[k] for k in ("input_ids", "position_ids", "attention_mask")}).logits,
                           packed)
    for side in (0, 1):  # chosen, rejected
        assert np.allclose(got[side].double().numpy(), want[side].double().numpy(), atol=1e-4, rtol=0)
