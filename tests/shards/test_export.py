"""Exporters round-trip: Megatron IndexedDataset, HF datasets, flat nanoGPT-style bin."""

from __future__ import annotations

import importlib.util
import json
import struct
import warnings

import numpy as np
import pytest

from tokenmill.errors import ConfigError, ShardError
from tokenmill.pack import concat_chunk
from tokenmill.shards import open_shards
from tokenmill.shards.export import export, iter_batches


def _read_megatron_idx(path):
    """Independent reader of the Megatron-LM .idx layout."""
    raw = path.read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    version, code, n_seq, n_doc = struct.unpack_from("<QBQQ", raw, 9)
    pos = 9 + 8 + 1 + 8 + 8
    lengths = np.frombuffer(raw, "<i4", n_seq, pos)
    pointers = np.frombuffer(raw, "<i8", n_seq, pos + 4 * n_seq)
    doc_index = np.frombuffer(raw, "<i8", n_doc, pos + 12 * n_seq)
    assert pos + 12 * n_seq + 8 * n_doc == len(raw)
    return version, code, lengths, pointers, doc_index


@pytest.mark.parametrize(("vocab", "code", "dtype"), [(1000, 8, "<u2"), (70_000, 4, "<i4")])
def test_megatron_layout_read_independently(tmp_path, make_corpus, info, vocab, code, dtype):
    corpus = make_corpus(n_docs=40, vocab=vocab, seed=1)
    corpus.write(tmp_path / "shards", info={**info, "vocab_size": vocab}, max_tokens=200)
    summary = export(tmp_path / "shards", to="megatron", out=tmp_path / "meg" / "train_text_document")
    version, got_code, lengths, pointers, doc_index = _read_megatron_idx(tmp_path / "meg" / "train_text_document.idx")
    expected = np.diff(corpus.offsets)
    assert (version, got_code, summary["n_sequences"]) == (1, code, 40)
    np.testing.assert_array_equal(lengths, expected)
    np.testing.assert_array_equal(pointers, np.concatenate([[0], np.cumsum(expected)[:-1]]) * np.dtype(dtype).itemsize)
    np.testing.assert_array_equal(doc_index, np.arange(41))
    np.testing.assert_array_equal(np.fromfile(tmp_path / "meg" / "train_text_document.bin", dtype), corpus.flat)


def test_megatron_core_reads_the_export(tmp_path, corpus):
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("megatron") is None:
        pytest.skip("megatron-core (and torch) not installed: pip install torch==2.13.0 megatron-core")
    with warnings.catch_warnings():  # megatron warns that optional GPU kernels are absent
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset

    corpus.write(tmp_path / "shards", max_tokens=300)
    export(tmp_path / "shards", to="megatron", out=tmp_path / "meg")
    meg, ds = IndexedDataset(str(tmp_path / "meg")), open_shards(tmp_path / "shards")
    assert len(meg) == len(ds) and meg.index.dtype == np.uint16
    np.testing.assert_array_equal(meg.sequence_lengths, ds.lengths)
    for i in range(len(ds)):
        np.testing.assert_array_equal(meg[i], ds.doc_tokens(i))
    np.testing.assert_array_equal(meg.document_indices, np.arange(len(ds) + 1))


def test_megatron_refuses_masked_shards(tmp_path, corpus):
    corpus.write(tmp_path / "shards", with_mask=True)
    with pytest.raises(ShardError, match="loss masks"):
        export(tmp_path / "shards", to="megatron", out=tmp_path / "meg")


def test_hf_export_with_labels(tmp_path, corpus):
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    corpus.write(tmp_path / "shards", with_mask=True, max_tokens=250)
    export(tmp_path / "shards", to="hf", out=tmp_path / "hf")
    hf = datasets.load_from_disk(str(tmp_path / "hf"))
    assert hf.column_names == ["input_ids", "labels", "id", "source"] and len(hf) == 60
    for i in (0, 31, 59):
        row, ids, mask = hf[i], corpus.doc(i), corpus.doc_mask(i)
        assert row["input_ids"] == ids.tolist() and (row["id"], row["source"]) == (corpus.rec_ids[i], corpus.sources[i])
        assert row["labels"] == np.where(mask, ids, -100).tolist()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "shards"]  # the temporary stream is gone


def test_hf_export_without_mask_has_no_labels(tmp_path, corpus):
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    corpus.write(tmp_path / "shards")
    export(tmp_path / "shards", to="hf", out=tmp_path / "hf", seq_len=64)
    hf = datasets.load_from_disk(str(tmp_path / "hf"))
    starts = concat_chunk(np.diff(corpus.offsets), 64, drop_last=True)
    assert hf.column_names == ["input_ids"] and len(hf) == len(starts) == len(corpus.flat) // 64
    for k in (0, len(starts) // 2, len(starts) - 1):
        assert hf[k]["input_ids"] == corpus.flat[starts[k] : starts[k] + 64].tolist()


def test_bin_export_round_trip_with_mask(tmp_path, corpus):
    corpus.write(tmp_path / "shards", with_mask=True, max_tokens=250)
    summary = export(tmp_path / "shards", to="bin", out=tmp_path / "train.bin")
    np.testing.assert_array_equal(np.fromfile(tmp_path / "train.bin", np.uint16), corpus.flat)
    np.testing.assert_array_equal(np.fromfile(tmp_path / "train.bin.mask", np.uint8).astype(bool), corpus.mask)
    side = json.loads((tmp_path / "train.bin.json").read_text())
    assert (side["dtype"], side["n_tokens"], side["n_sequences"]) == ("uint16", len(corpus.flat), 60)
    assert (side["eos_id"], side["tokenizer_fingerprint"], side["mask_file"]) == (0, "fp-toy-1", "train.bin.mask")
    assert summary["n_tokens"] == len(corpus.flat)


def test_fixed_length_bin_export_uses_concat_chunk(tmp_path, corpus):
    corpus.write(tmp_path / "shards", with_mask=True, max_tokens=200)
    export(tmp_path / "shards", to="bin", out=tmp_path / "w.bin", seq_len=50)
    n = len(corpus.flat) // 50
    np.testing.assert_array_equal(np.fromfile(tmp_path / "w.bin", np.uint16), corpus.flat[: n * 50])
    np.testing.assert_array_equal(np.fromfile(tmp_path / "w.bin.mask", np.uint8).astype(bool), corpus.mask[: n * 50])
    assert json.loads((tmp_path / "w.bin.json").read_text())["n_sequences"] == n


def test_batches_stay_bounded_and_cover_every_document(tmp_path, corpus):
    corpus.write(tmp_path, max_tokens=400)
    batches = list(iter_batches(open_shards(tmp_path), seq_len=None, batch_tokens=100))
    assert max(len(b.ids) for b in batches) <= 100 and len(batches) >= len(corpus.flat) // 100
    np.testing.assert_array_equal(np.concatenate([b.ids for b in batches]), corpus.flat)
    assert sum(len(b.offsets) - 1 for b in batches) == 60


def test_unknown_format_is_a_config_error(tmp_path, corpus):
    corpus.write(tmp_path)
    with pytest.raises(ConfigError, match="unknown export format"):
        export(tmp_path, to="parquet", out=tmp_path / "x")


@pytest.mark.parametrize(("vocab", "dtype", "nanogpt"), [(50_257, np.uint16, True), (65_536, np.uint16, True),
                                                           (100_277, np.uint32, False)])
def test_bin_dtype_is_said_in_the_sidecar_and_by_the_command(tmp_path, make_corpus, info, capsys, vocab, dtype,
                                                             nanogpt):
    from tokenmill.cli import main

    corpus = make_corpus(n_docs=30, vocab=vocab, seed=3)
    corpus.write(tmp_path / "shards", info={**info, "vocab_size": vocab}, max_tokens=200)
    assert main(["export", str(tmp_path / "shards"), "--to", "bin", "--out", str(tmp_path / "t.bin")]) == 0
    printed = capsys.readouterr().out
    np.testing.assert_array_equal(np.fromfile(tmp_path / "t.bin", dtype), corpus.flat)
    side = json.loads((tmp_path / "t.bin.json").read_text())
    assert side["dtype"] == np.dtype(dtype).name and np.dtype(dtype).name in side["dtype_note"]
    assert f"token dtype: {np.dtype(dtype).name}" in printed
    assert ("nanoGPT's loader reads it" in side["dtype_note"]) is nanogpt
    if not nanogpt:
        assert "hard-codes" in printed and f"{vocab:,} ids" in printed
