"""The packing proof on shards the SFT track really wrote (embedded tokenizer, ChatML template).

Conversations go through ``run_sft`` (normalise, render once, tokenize once, mask), the loader packs them
with BFD, and a tiny randomly initialised Llama gives the same loss on a packed batch as on the same
examples one by one; only supervised tokens count, and letting examples attend to each other changes it.
The real-data tier does the same on conversations from ``shared_data/sft``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tokenmill.loader import PackedCollator, PackedDataset  # noqa: E402
from tokenmill.sft.run import run_sft  # noqa: E402
from tokenmill.shards import open_shards  # noqa: E402

SEQ_LEN = 160


def conversations(n: int) -> list[dict]:
    rng = np.random.default_rng(0)
    words = "the data loader packs examples so that no compute is spent on padding tokens at all".split()
    out = []
    for i in range(n):
        turns = []
        for _ in range(int(rng.integers(1, 3))):
            turns.append({"from": "human", "value": " ".join(rng.choice(words, int(rng.integers(3, 12))))})
            turns.append({"from": "gpt", "value": " ".join(rng.choice(words, int(rng.integers(2, 20))))})
        out.append({"id": f"c{i}", "conversations": turns})
    return out


def tiny_llama(vocab_size: int, eos: int):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=SEQ_LEN, eos_token_id=eos, initializer_range=0.2)
    return transformers.LlamaForCausalLM(config).eval()


@torch.no_grad()
def check_packed_equals_unpacked(shard_dir) -> None:
    shards = open_shards(shard_dir)
    dataset = PackedDataset(shard_dir, seq_len=SEQ_LEN, seed=3)
    samples = [s for s in (dataset[k] for k in range(len(dataset))) if len(s["seq_lens"]) >= 3][:2]
    assert len(samples) == 2, "expected packed rows holding several examples"
    model = tiny_llama(shards.vocab_size, shards.eos_id)
    total = count = 0.0
    for s in samples:
        cuts = np.cumsum(s["seq_lens"])[:-1]
        for ids, mask in zip(np.split(s["input_ids"], cuts), np.split(s["loss_mask"], cuts)):
            labels = torch.from_numpy(np.where(mask, ids, -100).astype(np.int64))[None]
            n = int((labels[0, 1:] != -100).sum())
            if n:
                loss = model(input_ids=torch.from_numpy(ids.astype(np.int64))[None], labels=labels).loss
                total, count = total + float(loss) * n, count + n
    reference = total / count
    batch = PackedCollator(pad_id=shards.eos_id, block_diag_mask=True, pad_to=SEQ_LEN)(samples)
    supervised = int((batch["labels"] != -100).sum())
    assert supervised == count  # only the trained tokens of each example count, minus each first token
    assert float(model(**batch).loss) == pytest.approx(reference, abs=1e-4)
    leaky = float(model(input_ids=batch["input_ids"], labels=batch["labels"]).loss)
    assert abs(leaky - reference) > 1e-3


def test_packed_loss_on_sft_track_shards(tmp_path):
    src = tmp_path / "chats.json"
    src.write_text(json.dumps(conversations(40)))
    run_sft([str(src)], out=tmp_path / "out", tokenizer="default", workers=1, verify=8, progress=False)
    check_packed_equals_unpacked(tmp_path / "out")


@pytest.mark.realdata
def test_packed_loss_on_real_sft_shards(shared_data, tmp_path):
    sharegpt = json.loads((shared_data / "sft" / "fastchat_dummy_conversation_sharegpt.json").read_text())[:60]
    alpaca = json.loads((shared_data / "sft" / "llamafactory_alpaca_en_demo.json").read_text())[:60]
    (tmp_path / "sharegpt.json").write_text(json.dumps(sharegpt))
    (tmp_path / "alpaca.json").write_text(json.dumps([a for a in alpaca if len(a["output"]) < 300]))
    run_sft([str(tmp_path / "sharegpt.json"), str(tmp_path / "alpaca.json")], out=tmp_path / "out",
            tokenizer="default", workers=1, verify=8, progress=False, max_length=SEQ_LEN)
    check_packed_equals_unpacked(tmp_path / "out")
