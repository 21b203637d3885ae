"""Shards written by ``tokenmill sft`` train a tiny model in the three loops users bring: the ``transformers``
``Trainer``, TRL's ``SFTTrainer`` (pre-tokenized, packed, no deprecation warning) and a nanoGPT-style plain
loop with a model of its own. Each runs a few steps; the loss stays finite and the weights move."""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sft"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))
import chatkit  # noqa: E402
import trackkit as tk  # noqa: E402

from tokenmill import open_shards  # noqa: E402
from tokenmill.loader import PackedCollator, PackedDataset, PackedLoader  # noqa: E402

SEQ_LEN = 256
STEPS = 4


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """(shard directory, transformers tokenizer) from ``tokenmill sft`` run as a command."""
    root = tmp_path_factory.mktemp("trainers")
    tok_dir = chatkit.build_tokenizer_dir(root / "tok")
    tk.write_chats(root / "chats.jsonl", 60)
    done = tk.cli("sft", str(root / "chats.jsonl"), "--out", str(root / "sft"), "--tokenizer", str(tok_dir),
                  "--workers", "1", "--verify", "0")
    assert done.returncode == 0, done.stderr
    tokenizer = chatkit.hf_tokenizer(tok_dir)
    tokenizer.pad_token = tokenizer.eos_token
    return root / "sft", tokenizer


def tiny_llama(vocab: int):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=SEQ_LEN,
                                      use_cache=False)
    return transformers.LlamaForCausalLM(config)


def snapshot(model) -> list:
    return [p.detach().clone() for p in model.parameters()]


def assert_trained(model, before, losses):
    assert len(losses) >= STEPS and all(math.isfinite(v) for v in losses), losses
    moved = sum(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert moved == len(before), f"{len(before) - moved} of {len(before)} parameter tensors did not change"


def trainer_losses(trainer) -> list[float]:
    return [row["loss"] for row in trainer.state.log_history if "loss" in row]


def test_transformers_trainer(shards, tmp_path):
    directory, tokenizer = shards
    dataset = PackedDataset(directory, seq_len=SEQ_LEN, seed=0, tokenizer=tokenizer)
    model = tiny_llama(dataset.vocab_size)
    before = snapshot(model)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=STEPS,
                                          learning_rate=1e-2, logging_steps=1, report_to="none", save_strategy="no",
                                          remove_unused_columns=False)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=dataset,
                                   data_collator=PackedCollator(pad_id=dataset.pad_id, pad_to=SEQ_LEN))
    trainer.train()
    assert_trained(model, before, trainer_losses(trainer))


def test_trl_sft_trainer_pretokenized_packed(shards, tmp_path):
    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    directory, tokenizer = shards
    docs = open_shards(directory, tokenizer=tokenizer)
    train = datasets.Dataset.from_dict({
        "input_ids": [docs.doc_tokens(i).tolist() for i in range(len(docs))],
        "completion_mask": [docs.doc_mask(i).astype("int8").tolist() for i in range(len(docs))]})
    model = tiny_llama(len(tokenizer))
    before = snapshot(model)
    args = trl.SFTConfig(output_dir=str(tmp_path), max_length=SEQ_LEN, packing=True, packing_strategy="bfd",
                         completion_only_loss=True, per_device_train_batch_size=2, max_steps=STEPS,
                         learning_rate=1e-2, logging_steps=1, report_to="none", save_strategy="no",
                         activation_checkpointing=True, bf16=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = trl.SFTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
        trainer.train()
    deprecated = [str(w.message) for w in caught if issubclass(w.category, (DeprecationWarning, FutureWarning))]
    assert not deprecated, deprecated
    assert_trained(model, before, trainer_losses(trainer))


class TinyGPT(torch.nn.Module):
    """nanoGPT's shape in a few lines: token + learned position embeddings, pre-norm blocks, tied head.
    Attention takes the collator's block-diagonal mask; positions come from its ``position_ids``."""

    def __init__(self, vocab: int, dim: int = 32, layers: int = 2, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = torch.nn.Embedding(vocab, dim), torch.nn.Embedding(SEQ_LEN, dim)
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict({"ln1": torch.nn.LayerNorm(dim), "qkv": torch.nn.Linear(dim, 3 * dim),
                                 "proj": torch.nn.Linear(dim, dim), "ln2": torch.nn.LayerNorm(dim),
                                 "mlp": torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                                            torch.nn.Linear(4 * dim, dim))})
            for _ in range(layers))
        self.ln = torch.nn.LayerNorm(dim)

    def forward(self, input_ids, position_ids, attention_mask):
        x = self.tok(input_ids) + self.pos(position_ids)
        b, length, dim = x.shape
        for block in self.blocks:
            q, k, v = block["qkv"](block["ln1"](x)).view(b, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            attended = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
            x = x + block["proj"](attended.transpose(1, 2).reshape(b, length, dim))
            x = x + block["mlp"](block["ln2"](x))
        return self.ln(x) @ self.tok.weight.T


def test_nanogpt_style_loop(shards):
    directory, tokenizer = shards
    dataset = PackedDataset(directory, seq_len=SEQ_LEN, seed=0, tokenizer=tokenizer)
    loader = PackedLoader(dataset, batch_size=2, collate_fn=PackedCollator(pad_id=dataset.pad_id, pad_to=SEQ_LEN,
                                                                           mask="bool"))
    torch.manual_seed(0)
    model = TinyGPT(dataset.vocab_size)
    before = snapshot(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for batch in loader:
        logits = model(batch["input_ids"], batch["position_ids"], batch["attention_mask"])
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 batch["labels"][:, 1:].reshape(-1), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if len(losses) == 3 * STEPS:
            break
    assert_trained(model, before, losses)
    assert np.mean(losses[-STEPS:]) < np.mean(losses[:STEPS])  # a plain loop at lr 1e-2 learns the shards
