"""BlendedDataset: proportions by a counter rule, masks kept, tokenizers checked."""

from __future__ import annotations

import numpy as np
import pytest
from loaderkit import pretrain_docs, sft_docs

from tokenmill.errors import ShardError
from tokenmill.loader import BlendedDataset, PackedDataset


@pytest.mark.parametrize("weights", [[1, 1], [3, 1], [0.5, 0.3, 0.2], [5, 1, 1, 2, 1]])
def test_route_follows_weights_with_low_error(write_shards, weights):
    sources = [write_shards(pretrain_docs(np.random.default_rng(i), 60), name=f"s{i}") for i in range(len(weights))]
    blend = BlendedDataset(list(zip(sources, weights)), seq_len=16, num_samples=5000)
    share = np.asarray(weights) / sum(weights)
    counts = np.zeros(len(weights))
    for k in range(5000):
        i, j = blend.route(k)
        assert j == counts[i]  # each component is read in order, no index stored
        counts[i] += 1
        if k % 97 == 0:
            assert np.abs(counts - (k + 1) * share).max() <= np.log2(len(weights)) + 1
    assert counts.tolist() == blend.counts(5000)


def test_default_length_repeats_no_component(write_shards):
    a = write_shards(pretrain_docs(np.random.default_rng(0), 100), name="a")
    b = write_shards(pretrain_docs(np.random.default_rng(1), 20), name="b")
    blend = BlendedDataset([(a, 1), (b, 1)], seq_len=16)
    sizes = [len(d) for d in blend.datasets]
    counts = blend.counts(len(blend))
    assert all(c <= s for c, s in zip(counts, sizes)) and counts[1] == sizes[1]
    assert any(c > s for c, s in zip(blend.counts(len(blend) + 1), sizes))


def test_blend_keeps_each_documents_mask(write_shards):
    rng = np.random.default_rng(3)
    sft = PackedDataset(write_shards(sft_docs(rng, 40), name="sft"), seq_len=64)
    pre = write_shards(pretrain_docs(rng, 80), name="pre")
    blend = BlendedDataset([(sft, 2), (pre, 1)], seq_len=64)
    for k in range(len(blend)):
        i, j = blend.route(k)
        sample, own = blend[k], blend.datasets[i][j]
        np.testing.assert_array_equal(sample["loss_mask"], own["loss_mask"])
        assert sample["loss_mask"].all() == (i == 1)


def test_blend_refuses_other_tokenizers(write_shards):
    rng = np.random.default_rng(4)
    a = write_shards(pretrain_docs(rng, 20), name="a", fingerprint="fp-a")
    b = write_shards(pretrain_docs(rng, 20), name="b", fingerprint="fp-b")
    with pytest.raises(ShardError, match="share one tokenizer"):
        BlendedDataset([(a, 1), (b, 1)], seq_len=16)
