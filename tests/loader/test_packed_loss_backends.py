"""Per-example loss of a packed batch equals each example run alone, within 1e-6 in fp32, on every attention
backend a CPU offers: eager, SDPA and flex, on tiny random Llama and Qwen2 models.

The batch is what ``PackedCollator`` gives (``input_ids``, ``labels``, ``position_ids``, ``cu_seq_lens_q``
and the attention mask in the backend's form); the per-example losses are cut out of the packed logits at
the collator's ``cu_seq_lens_q``. The reference runs every example of the shards' packed samples alone.
Each check is shown able to fail: a plain causal mask, and a bool mask on eager (which adds it to the
scores), both let examples attend to each other.
"""

from __future__ import annotations

import numpy as np
import pytest
from loaderkit import EOS, PAD, VOCAB, sft_docs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tokenmill.errors import ConfigError  # noqa: E402
from tokenmill.loader import PackedCollator, PackedDataset  # noqa: E402

WIDTH = 128
TOL = 1e-6
FAMILIES = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_model(family: str, attn: str):
    config_cls, model_cls = (getattr(transformers, name) for name in FAMILIES[family])
    torch.manual_seed(0)
    config = config_cls(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=WIDTH,
                        pad_token_id=PAD, eos_token_id=EOS, initializer_range=0.2, attn_implementation=attn)
    return model_cls(config).eval()


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    from tokenmill.shards import ShardWriter

    directory = tmp_path_factory.mktemp("packedloss") / "sft"
    info = {"name": "test-tok", "fingerprint": "fp-test", "vocab_size": VOCAB, "eos_id": EOS, "pad_id": PAD}
    with ShardWriter(directory, stem_prefix="sft", tokenizer_info=info, max_tokens=500, with_mask=True) as writer:
        for i, (ids, mask) in enumerate(sft_docs(np.random.default_rng(0), 40, min_len=4, max_len=40)):
            writer.add(ids, rec_id=f"sft:{i}", source="sft", mask=mask)
    dataset = PackedDataset(directory, seq_len=WIDTH, seed=1)
    picked = [s for s in (dataset[k] for k in range(len(dataset))) if len(s["seq_lens"]) >= 3][:3]
    assert len(picked) == 3
    return picked


def token_losses(logits, labels):
    """Cross-entropy of every label the model predicts (label at t from logits at t-1), 0 where -100.

    The model runs in fp32; its logits are reduced in float64 so that the comparison measures the model's
    packed-versus-alone difference, not a few ulps of the loss's own fp32 summation over 96 classes."""
    flat = torch.nn.functional.cross_entropy(logits[:, :-1].double().reshape(-1, logits.shape[-1]),
                                             labels[:, 1:].reshape(-1), reduction="none", ignore_index=-100)
    return torch.nn.functional.pad(flat.view(labels.shape[0], -1), (1, 0))  # aligned with labels


def per_example_packed(logits, batch) -> list[float]:
    """Mean loss of each segment of the flattened batch, cut at the collator's ``cu_seq_lens_q``."""
    losses = token_losses(logits, batch["labels"]).reshape(-1)
    trained = (batch["labels"] != -100).reshape(-1)
    cu = batch["cu_seq_lens_q"].tolist()
    out = []
    for start, end in zip(cu[:-1], cu[1:]):
        n = int(trained[start:end].sum())
        if n:  # padding tails and examples with nothing trained after their first token
            out.append(float(losses[start:end].sum() / n))
    return out


def examples(samples):
    """(ids, mask) of every example packed in ``samples``, in order."""
    for s in samples:
        cuts = np.cumsum(s["seq_lens"])[:-1]
        yield from zip(np.split(s["input_ids"], cuts), np.split(s["loss_mask"], cuts))


def per_example_alone(model, samples) -> list[float]:
    """Mean loss of every example run alone: its own row, right-padded to the packed width with a plain
    causal mask (padding after an example cannot reach it). The same width keeps the backends' kernels on
    the same shapes, so what is compared is packing, not blocking."""
    out = []
    for ids, mask in examples(samples):
        row = np.full(WIDTH, PAD, np.int64)
        row[:ids.size] = ids
        labels = np.full(WIDTH, -100, np.int64)
        labels[:ids.size] = np.where(mask, ids, -100)
        labels = torch.from_numpy(labels)[None]
        n = int((labels[:, 1:] != -100).sum())
        if n:
            logits = model(input_ids=torch.from_numpy(row)[None]).logits
            out.append(float(token_losses(logits, labels).sum() / n))
    return out


def packed_losses(model, samples, mask: str | None, **forward) -> list[float]:
    batch = PackedCollator(pad_id=PAD, pad_to=WIDTH, varlen_kwargs=True, mask=mask)(samples)
    inputs = {k: batch[k] for k in ("input_ids", "position_ids", "attention_mask") if k in batch}
    return per_example_packed(model(**inputs, **forward).logits, batch)


def assert_close(got, want):
    assert len(got) == len(want) >= 9
    worst = max(abs(a - b) for a, b in zip(got, want))
    print(f"largest per-example difference {worst:.3g}")
    assert worst <= TOL, f"largest per-example difference {worst:.3g}"


# (backend, mask form the collator emits); None: position_ids alone, transformers derives the blocks
CASES = [("eager", "additive"), ("sdpa", "bool"), ("sdpa", "additive"), ("eager", None), ("sdpa", None)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize(("attn", "mask"), CASES)
@torch.no_grad()
def test_packed_per_example_loss_equals_unpacked(samples, family, attn, mask):
    model = tiny_model(family, attn)
    reference = per_example_alone(model, samples)
    assert_close(packed_losses(model, samples, mask, use_cache=False), reference)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@torch.no_grad()
def test_packed_per_example_loss_equals_unpacked_flex(samples, family):
    pytest.importorskip("torch.nn.attention.flex_attention", reason="this torch has no flex attention")
    model = tiny_model(family, "flex_attention")
    assert_close(packed_losses(model, samples, "flex"), per_example_alone(model, samples))


@torch.no_grad()
def test_the_check_can_fail(samples):
    """A plain causal mask, and a bool block mask on eager, let examples see each other: the losses move."""
    model = tiny_model("llama", "eager")
    reference = per_example_alone(model, samples)
    for leaky in (packed_losses(model, samples, "bool"), packed_losses(model, samples, None, use_cache=True)):
        assert max(abs(a - b) for a, b in zip(leaky, reference)) > 1e-3


@torch.no_grad()
def test_block_diag_mask_is_right_on_eager(samples):
    """``block_diag_mask=True``, the older spelling, gives the form every backend reads right: on eager a bool
    mask is added to the scores and examples see each other."""
    model = tiny_model("llama", "eager")
    batch = PackedCollator(pad_id=PAD, pad_to=WIDTH, varlen_kwargs=True, block_diag_mask=True)(samples)
    inputs = {k: batch[k] for k in ("input_ids", "position_ids", "attention_mask")}
    assert_close(per_example_packed(model(**inputs, use_cache=False).logits, batch), per_example_alone(model, samples))


def test_mask_forms():
    s = {"input_ids": np.arange(2, 7), "loss_mask": np.ones(5, np.bool_), "seq_lens": np.array([2, 3])}
    bool_mask = PackedCollator(pad_id=0, pad_to=6, mask="bool")([s])["attention_mask"]
    additive = PackedCollator(pad_id=0, pad_to=6, mask="additive")([s])["attention_mask"]
    assert bool_mask.dtype == torch.bool and additive.dtype == torch.float32
    assert torch.equal(additive == 0, bool_mask)
    assert bool(bool_mask[0, 0, 3, 2]) and not bool(bool_mask[0, 0, 2, 1]) and not bool(bool_mask[0, 0, 5, 4])
    assert torch.equal(PackedCollator(pad_id=0, pad_to=6, block_diag_mask=True)([s])["attention_mask"], additive)
    with pytest.raises(ConfigError, match="mask must be one of"):
        PackedCollator(pad_id=0, mask="causal")
    with pytest.raises(ConfigError, match="block_diag_mask=True is mask='additive'"):
        PackedCollator(pad_id=0, block_diag_mask=True, mask="additive")
