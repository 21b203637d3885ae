"""Long-context windows (32k-128k): documents keep their boundaries inside a window (positions restart at
every document, varlen boundaries are the documents'), whole documents stay whole in ``boundary`` mode, and
length-aware upsampling repeats exactly the long documents."""

from __future__ import annotations

import numpy as np
import pytest
from loaderkit import EOS

from tokenmill.loader import PackedDataset, RecipeDataset


@pytest.fixture
def long_docs(write_shards):
    rng = np.random.default_rng(7)
    lengths = [int(n) for n in rng.integers(200, 40_000, size=24)] + [150_000]
    docs = []
    for n in lengths:
        ids = rng.integers(2, 96, size=n)
        ids[-1] = EOS
        docs.append((ids, None))
    return write_shards(docs, name="long", max_tokens=200_000), docs


@pytest.mark.parametrize("window", [32_768, 65_536, 131_072])
def test_concat_windows_keep_document_boundaries(long_docs, window):
    torch = pytest.importorskip("torch")
    from tokenmill.loader import PackedCollator

    directory, docs = long_docs
    stream = np.concatenate([d for d, _ in docs])
    bounds = set(np.cumsum([d.size for d, _ in docs]).tolist())
    dataset = PackedDataset(directory, seq_len=window, mode="concat", shuffle=False)
    assert len(dataset) == stream.size // window
    collate = PackedCollator(pad_id=dataset.pad_id, varlen_kwargs=True)
    for k in range(len(dataset)):
        sample = dataset[k]
        np.testing.assert_array_equal(sample["input_ids"], stream[k * window:(k + 1) * window])
        starts = [k * window + s for s in np.concatenate([[0], np.cumsum(sample["seq_lens"])[:-1]])]
        assert all(s == k * window or s in bounds for s in starts)  # a piece starts at a document start
        batch = collate([sample])
        positions = batch["position_ids"][0].numpy()
        expected = np.concatenate([np.arange(n) for n in sample["seq_lens"]])
        np.testing.assert_array_equal(positions, expected)  # positions restart at every document
        cu = batch["cu_seq_lens_q"].numpy()
        np.testing.assert_array_equal(cu, np.concatenate([[0], np.cumsum(sample["seq_lens"])]))
        assert batch["cu_seq_lens_q"].dtype == torch.int32


def test_boundary_mode_cuts_only_documents_longer_than_the_window(long_docs):
    directory, docs = long_docs
    window = 65_536
    dataset = PackedDataset(directory, seq_len=window, mode="boundary", shuffle=False)
    pieces = [dataset.pieces(k) for k in range(len(dataset))]
    for doc, (ids, _) in enumerate(docs):
        parts = [(int(s), int(n)) for ds, ss, ns in pieces for d, s, n in zip(ds, ss, ns) if d == doc]
        expected = -(-ids.size // window)
        assert len(parts) == expected and sum(n for _, n in parts) == ids.size


def test_upsampling_repeats_only_the_long_documents(long_docs, tmp_path):
    directory, docs = long_docs
    plain = PackedDataset(directory, seq_len=32_768, mode="concat", shuffle=False)
    more = PackedDataset(directory, seq_len=32_768, mode="concat", shuffle=False, upsample_long=(30_000, 3))
    long_tokens = sum(d.size for d, _ in docs if d.size >= 30_000)
    assert more.corpus.lengths.sum() == plain.corpus.lengths.sum() + 2 * long_tokens
    assert more.fingerprint != plain.fingerprint
    path = tmp_path / "r.yaml"
    path.write_text(f"seq_len: 32768\nbatch: 1\nsources: {{long: {{path: {directory}, upsample_long: "
                    "{min_tokens: 30000, factor: 3}}}\nphases: [{name: long, steps: 4, weights: {long: 1}}]\n")
    recipe = RecipeDataset(path)
    assert len(recipe) == 4 and recipe[3]["input_ids"].size == 32_768
