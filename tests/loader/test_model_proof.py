"""Proof on a tiny causal LM: packed loss == per-example loss, training converges, resume is exact."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from loaderkit import EOS, PAD, VOCAB, sft_docs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tokenmill.loader import PackedCollator, PackedDataset, PackedLoader  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: steps this small only lose time to thread handoffs on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_llama(seed=0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      pad_token_id=PAD, eos_token_id=EOS, bos_token_id=None,
                                      initializer_range=0.2)  # larger weights: attention matters
    return transformers.LlamaForCausalLM(config).eval()


def per_example_loss(model, dataset, samples):
    """Token-weighted mean of the losses of every packed example run alone."""
    total, count = 0.0, 0
    for k in samples:
        s = dataset[k]
        cuts = np.cumsum(s["seq_lens"])[:-1]
        for ids, mask in zip(np.split(s["input_ids"], cuts), np.split(s["loss_mask"], cuts)):
            labels = torch.from_numpy(np.where(mask, ids, -100))[None]
            n = int((labels[0, 1:] != -100).sum())
            if n:
                out = model(input_ids=torch.from_numpy(ids)[None], labels=labels)
                total, count = total + float(out.loss) * n, count + n
    return total / count


@pytest.fixture
def packed(write_shards):
    docs = sft_docs(np.random.default_rng(0), 60, min_len=4, max_len=40)
    dataset = PackedDataset(write_shards(docs), seq_len=64, seed=1)
    return dataset, [0, 1, 2, 3]


@torch.no_grad()
def test_packed_loss_equals_per_example_loss(packed):
    dataset, samples = packed
    model = tiny_llama()
    reference = per_example_loss(model, dataset, samples)
    batch = PackedCollator(pad_id=PAD, block_diag_mask=True, pad_to=64)([dataset[k] for k in samples])
    assert (batch["position_ids"] == 0).sum() > len(samples)  # several documents per row
    with_mask = float(model(**batch).loss)
    assert with_mask == pytest.approx(reference, abs=1e-4)
    # transformers also detects packing from position_ids alone, when there is no mask and no cache
    positions_only = {k: v for k, v in batch.items() if k != "attention_mask"}
    assert float(model(**positions_only, use_cache=False).loss) == pytest.approx(reference, abs=1e-4)
    # the test can tell: a plain causal mask lets examples attend to each other
    leaky = float(model(input_ids=batch["input_ids"], labels=batch["labels"]).loss)
    print(f"reference {reference:.6f} packed {with_mask:.6f} leaky {leaky:.6f}")
    assert abs(leaky - reference) > 1e-3


def learnable_docs(rng, n):
    """Untrained random prompt, then a trained response counting up by 3 from the prompt's last token."""
    docs = []
    for _ in range(n):
        prompt = rng.integers(2, VOCAB, size=int(rng.integers(2, 8)))
        steps = np.arange(1, int(rng.integers(6, 30)) + 1)
        response = (prompt[-1] - 2 + 3 * steps) % (VOCAB - 2) + 2
        ids = np.concatenate([prompt, response, [EOS]])
        docs.append((ids, np.arange(ids.size) >= prompt.size))
    return docs


def train(model, loader, steps, optimizer, seen, losses, *, snapshot_at=None):
    """Run ``steps`` steps; returns the full training state taken after ``snapshot_at`` steps."""
    snapshot = None
    while len(losses) < steps:
        for batch in loader:
            seen.append(batch["input_ids"].clone())
            loss = model(**batch).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == snapshot_at:
                snapshot = copy.deepcopy({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                          "loader": loader.state_dict()})
            if len(losses) == steps:
                break
    return snapshot


def fresh(directory, state=None):
    model = tiny_llama(seed=1).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    dataset = PackedDataset(directory, seq_len=64, seed=7)
    loader = PackedLoader(dataset, batch_size=4, collate_fn=PackedCollator(pad_id=PAD, pad_to=64))
    if state:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
    return model, optimizer, loader


def test_training_converges_and_resume_is_exact(write_shards):
    directory = write_shards(learnable_docs(np.random.default_rng(3), 200), max_tokens=2000)
    model, optimizer, loader = fresh(directory)
    seen, losses = [], []
    state = train(model, loader, 200, optimizer, seen, losses, snapshot_at=100)
    print(f"loss first 20 steps {np.mean(losses[:20]):.3f}, last 20 {np.mean(losses[-20:]):.3f}")
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])

    model, optimizer, loader = fresh(directory, state)  # a new process would do the same
    seen_b, losses_b = seen[:100], losses[:100]
    train(model, loader, 200, optimizer, seen_b, losses_b)
    assert all(torch.equal(a, b) for a, b in zip(seen, seen_b, strict=True))
    assert losses_b[-1] == pytest.approx(losses[-1], rel=1e-5)
