"""Preference pair collators: TRL's padded batch, and packed prefix-shared rows whose per-completion log-prob
sums equal those of each prompt+completion run alone (1e-5, fp32, tiny random Llama, eager/SDPA/flex)."""

from __future__ import annotations

import numpy as np
import pytest
from loaderkit import EOS, PAD, VOCAB

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tokenmill.errors import ConfigError  # noqa: E402
from tokenmill.loader import masks  # noqa: E402
from tokenmill.loader.pairs import (  # noqa: E402
    PackedPairCollator,
    PaddedPairCollator,
    dpo_loss,
    packed_logps,
    padded_logps,
)

SEQ_LEN = 128
TOL = 1e-5


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make_pairs(n: int, seed: int = 0) -> list[dict]:
    """Random pairs as PreferenceDataset yields them; some completion tokens untrained."""
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n):
        pair = {"pair_id": 100 + i, "prompt_ids": rng.integers(2, VOCAB, int(rng.integers(3, 25))).astype(np.int32)}
        for side in ("chosen", "rejected"):
            ids = rng.integers(2, VOCAB, int(rng.integers(1, 15))).astype(np.int32)
            ids[-1] = EOS
            pair[f"{side}_ids"], pair[f"{side}_mask"] = ids, (rng.random(ids.size) < 0.9).astype(np.uint8)
        pairs.append(pair)
    return pairs


def tiny_llama(attn: str, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ_LEN,
                                      pad_token_id=PAD, eos_token_id=EOS, initializer_range=0.2,
                                      attn_implementation=attn)
    return transformers.LlamaForCausalLM(config).eval()


def alone_logps(model, pairs) -> tuple[list[float], list[float]]:
    """Oracle: each prompt+completion in a row of its own (right-padded to SEQ_LEN, plain causal mask),
    trained completion tokens' log-probs summed."""
    out = {"chosen": [], "rejected": []}
    for p in pairs:
        for side in out:
            ids = np.concatenate([p["prompt_ids"], p[f"{side}_ids"]]).astype(np.int64)
            row = torch.full((1, SEQ_LEN), PAD)
            row[0, :ids.size] = torch.from_numpy(ids)
            logp = torch.log_softmax(model(input_ids=row).logits[0].float(), -1)
            start = p["prompt_ids"].size
            total = np.float32(0)  # summed in fp32 in token order, as a trainer sums one unpacked row
            for t in range(start, ids.size):
                if p[f"{side}_mask"][t - start]:
                    total = np.float32(total + np.float32(logp[t - 1, ids[t]].item()))
            out[side].append(float(total))
    return out["chosen"], out["rejected"]


def assert_close(got, want):
    worst = float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))
    assert worst <= TOL, f"largest per-completion difference {worst:.3g}"


@pytest.mark.parametrize(("attn", "mask"), [("eager", "additive"), ("sdpa", "bool"), ("sdpa", "additive"),
                                            ("flex_attention", "flex")])
@torch.no_grad()
def test_packed_pair_logps_equal_unpacked(attn, mask):
    if mask == "flex":
        pytest.importorskip("torch.nn.attention.flex_attention", reason="this torch has no flex attention")
    pairs = make_pairs(12)
    model = tiny_llama(attn)
    batch = PackedPairCollator(pad_id=PAD, seq_len=SEQ_LEN, mask=mask)(pairs)
    assert batch["input_ids"].shape[0] < len(pairs) / 2  # several pairs per row
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                   attention_mask=batch["attention_mask"]).logits
    chosen, rejected = packed_logps(logits, batch)
    want_chosen, want_rejected = alone_logps(model, pairs)
    assert_close(chosen, want_chosen)
    assert_close(rejected, want_rejected)


@torch.no_grad()
def test_rejected_seeing_chosen_would_be_caught():
    """The check can fail: with a plain block mask (rejected may attend chosen) the rejected sums move."""
    pairs = make_pairs(12)
    model = tiny_llama("sdpa")
    batch = PackedPairCollator(pad_id=PAD, seq_len=SEQ_LEN, mask="bool")(pairs)
    segments = np.cumsum(batch["position_ids"].numpy() == 0, axis=1)  # a pair starts at position 0
    leaky_mask = masks.build("bool", segments)  # same pair and causal, without the branch rule
    assert not torch.equal(leaky_mask, batch["attention_mask"])
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], attention_mask=leaky_mask).logits
    _, rejected = packed_logps(logits, batch)
    _, want_rejected = alone_logps(model, pairs)
    assert np.max(np.abs(rejected.numpy() - np.asarray(want_rejected))) > 1e-3


def test_padded_batch_matches_trl_collator():
    trl_dpo = pytest.importorskip("trl.trainer.dpo_trainer")
    pairs = make_pairs(5)
    ours = PaddedPairCollator(pad_id=PAD)(pairs)
    lists = [{k: np.asarray(p[k]).tolist() for k in ("prompt_ids", "chosen_ids", "rejected_ids")} for p in pairs]
    theirs = trl_dpo.DataCollatorForPreference(pad_token_id=PAD)(lists)
    assert sorted(ours) == sorted(theirs)
    assert torch.equal(ours["input_ids"], theirs["input_ids"])
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"])
    # TRL trains every completion token; ours follows the pair's masks, so it is TRL's mask where they are 1
    assert int(ours["completion_mask"].sum()) == int(sum(p["chosen_mask"].sum() + p["rejected_mask"].sum()
                                                         for p in pairs))
    assert torch.all(ours["completion_mask"] <= theirs["completion_mask"])


@torch.no_grad()
def test_dpo_loss_equal_on_padded_and_packed_paths():
    pairs = make_pairs(10, seed=4)
    policy, reference = tiny_llama("sdpa", seed=0), tiny_llama("sdpa", seed=1)
    padded = PaddedPairCollator(pad_id=PAD)(pairs)
    packed = PackedPairCollator(pad_id=PAD, seq_len=SEQ_LEN, mask="additive")(pairs)
    inputs = {k: packed[k] for k in ("input_ids", "position_ids", "attention_mask")}
    losses = []
    for logps, batch, forward in ((padded_logps, padded, {k: padded[k] for k in ("input_ids", "attention_mask")}),
                                  (packed_logps, packed, inputs)):
        chosen, rejected = logps(policy(**forward).logits, batch)
        ref_chosen, ref_rejected = logps(reference(**forward).logits, batch)
        losses.append(float(dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta=0.5)))
    assert losses[0] == pytest.approx(losses[1], abs=1e-6)
    assert abs(losses[0] - np.log(2)) > 1e-3  # the two models differ: the loss is not the trivial log 2


def test_packed_layout():
    pair = {"pair_id": 7, "prompt_ids": [5, 6, 7], "chosen_ids": [8, 9], "rejected_ids": [10],
            "chosen_mask": [1, 1], "rejected_mask": [1]}
    batch = PackedPairCollator(pad_id=0, seq_len=8, mask="bool")([pair])
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9, 10, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3, 4, 3, 0, 1]]
    allowed = batch["attention_mask"][0, 0]
    assert allowed[5].tolist() == [True, True, True, False, False, True, False, False]  # rejected: prompt, itself
    assert allowed[4].tolist() == [True, True, True, True, True, False, False, False]
    assert batch["logit_index"].tolist() == [2, 3, 2]  # chosen 8 <- 7, 9 <- 8; rejected 10 <- 7
    assert batch["target_ids"].tolist() == [8, 9, 10] and batch["completion_index"].tolist() == [0, 0, 1]


def test_bad_pairs_are_config_errors():
    with pytest.raises(ConfigError, match="pair 100 takes .* seq_len is 8"):
        PackedPairCollator(pad_id=0, seq_len=8)(make_pairs(1))
    with pytest.raises(ConfigError, match="lacks 'prompt_ids'"):
        PackedPairCollator(pad_id=0, seq_len=64)([{"pair_id": 1, "chosen_ids": [1], "rejected_ids": [2]}])
    with pytest.raises(ConfigError, match="needs a mask"):
        PackedPairCollator(pad_id=0, seq_len=64, mask=None)
