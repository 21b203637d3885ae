"""Write/read round trips, dtype choice, shard splitting, determinism, fingerprint refusal, zero copy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tokenmill.shards as shards_pkg
from tokenmill.errors import ConfigError, ShardError
from tokenmill.shards import ShardWriter, open_shards


def _assert_matches(ds, corpus, *, with_mask: bool) -> None:
    assert len(ds) == len(corpus.rec_ids)
    for i in range(len(ds)):
        doc = ds[i]
        np.testing.assert_array_equal(doc["input_ids"], corpus.doc(i))
        assert (doc["id"], doc["source"]) == (corpus.rec_ids[i], corpus.sources[i])
        if with_mask:
            assert doc["loss_mask"].dtype == np.bool_
            np.testing.assert_array_equal(doc["loss_mask"], corpus.doc_mask(i))
        else:
            assert doc["loss_mask"] is None and ds.doc_mask(i) is None
    np.testing.assert_array_equal(ds.lengths, np.diff(corpus.offsets))


def test_round_trip_without_mask(tmp_path, corpus, info):
    corpus.write(tmp_path)
    ds = open_shards(tmp_path, tokenizer=info["fingerprint"])
    _assert_matches(ds, corpus, with_mask=False)
    assert ds.n_tokens == len(corpus.flat) and not ds.has_mask
    assert ds.n_trained_tokens == ds.n_tokens
    assert (ds.vocab_size, ds.eos_id, ds.bos_id, ds.pad_id) == (1000, 0, 1, 2)
    assert ds.header["chat_template_hash"] == "" and ds.dtype == np.uint16
    assert not (tmp_path / "part-0000.mask").exists()


def test_round_trip_with_mask(tmp_path, corpus):
    corpus.write(tmp_path, with_mask=True)
    ds = open_shards(tmp_path)
    _assert_matches(ds, corpus, with_mask=True)
    assert ds.has_mask and ds.n_trained_tokens == int(corpus.mask.sum())
    header = json.loads((tmp_path / "part-0000.json").read_text())
    assert header["n_trained_tokens"] == int(corpus.mask.sum()) and header["has_mask"] is True


def test_add_one_by_one_equals_add_many(tmp_path, corpus, info):
    corpus.write(tmp_path / "many", with_mask=True)
    with ShardWriter(tmp_path / "one", stem_prefix="part", tokenizer_info=info, with_mask=True) as w:
        for i, rec in enumerate(corpus.rec_ids):
            w.add(corpus.doc(i), rec_id=rec, source=corpus.sources[i], mask=corpus.doc_mask(i))
    for f in sorted((tmp_path / "many").iterdir()):
        assert (tmp_path / "one" / f.name).read_bytes() == f.read_bytes(), f.name


@pytest.mark.parametrize(("vocab", "dtype", "top_id"), [(65_536, "uint16", 65_535), (65_537, "uint32", 65_536)])
def test_dtype_follows_vocab_size(tmp_path, info, vocab, dtype, top_id):
    info["vocab_size"] = vocab
    with ShardWriter(tmp_path, stem_prefix="v", tokenizer_info=info) as w:
        w.add(np.array([top_id, 5, 0]), rec_id="a", source="s")
    ds = open_shards(tmp_path)
    assert ds.header["dtype"] == dtype and ds.dtype == np.dtype(dtype)
    assert (tmp_path / "v-0000.ids").stat().st_size == 3 * np.dtype(dtype).itemsize
    assert ds.doc_tokens(0).tolist() == [top_id, 5, 0]


def test_split_across_parts_never_splits_a_document(tmp_path, make_corpus):
    corpus = make_corpus(n_docs=50, vocab=1000, seed=3, max_len=30)
    lengths = np.diff(corpus.offsets)
    lengths_with_giant = np.append(lengths, 120)  # longer than max_tokens: a shard of its own
    corpus.flat = np.concatenate([corpus.flat, np.full(120, 7)])
    corpus.offsets = np.concatenate([[0], np.cumsum(lengths_with_giant)])
    corpus.mask = np.concatenate([corpus.mask, np.ones(120, bool)])
    corpus.rec_ids.append("giant")
    corpus.sources.append("big.jsonl")
    stems = corpus.write(tmp_path, max_tokens=100, with_mask=True)
    assert stems == [f"part-{k:04d}" for k in range(len(stems))] and len(stems) > 5
    ds = open_shards(tmp_path)
    _assert_matches(ds, corpus, with_mask=True)
    sizes = [s.n_tokens for s in ds.shards]
    assert all(n <= 100 for n in sizes[:-1]) and sizes[-1] == 120 and ds.shards[-1].n_docs == 1
    # greedy: the next shard's first document would not have fit in the previous one
    for prev, nxt in zip(ds.shards, ds.shards[1:]):
        assert prev.n_tokens + int(np.diff(nxt.offsets)[0]) > 100


def test_same_input_gives_identical_bytes(tmp_path, corpus):
    for name in ("a", "b"):
        corpus.write(tmp_path / name, with_mask=True, max_tokens=300)
    files_a = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files_a == sorted(p.name for p in (tmp_path / "b").iterdir()) and len(files_a) > 5
    for name in files_a:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_fingerprint_mismatch_is_refused(tmp_path, corpus):
    corpus.write(tmp_path)

    class Tok:
        fingerprint = "fp-other"

    with pytest.raises(ShardError) as err:
        open_shards(tmp_path, tokenizer=Tok())
    assert "fp-other" in str(err.value) and "fp-toy-1" in str(err.value) and str(tmp_path) in str(err.value)
    Tok.fingerprint = "fp-toy-1"
    assert len(open_shards(tmp_path, tokenizer=Tok())) == len(corpus.rec_ids)


def test_directory_mixing_runs_is_refused(tmp_path, corpus, info):
    corpus.write(tmp_path, prefix="a")
    corpus.write(tmp_path, prefix="b", info={**info, "fingerprint": "fp-other"})
    with pytest.raises(ShardError, match="tokenizer_fingerprint"):
        open_shards(tmp_path)


def test_manifest_and_foreign_json_are_not_shards(tmp_path, corpus):
    corpus.write(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"run": "r1", "n_docs": 60}))
    (tmp_path / "notes.json").write_text("[1, 2]")
    ds = open_shards(tmp_path)
    assert ds.manifest == {"run": "r1", "n_docs": 60} and [s.stem for s in ds.shards] == ["part-0000"]


def test_empty_or_missing_directory_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "manifest.json").write_text("{}")
    with pytest.raises(ShardError, match="no tokenmill shard headers"):
        open_shards(tmp_path / "empty")
    with pytest.raises(ShardError, match="does not exist"):
        open_shards(tmp_path / "missing")


def test_reads_are_zero_copy_views(tmp_path, corpus):
    corpus.write(tmp_path, with_mask=True, max_tokens=400)
    ds = open_shards(tmp_path)
    doc = ds[7]
    shard = next(s for s in ds.shards if np.shares_memory(doc["input_ids"], s.ids))
    assert isinstance(shard.ids, np.memmap) and isinstance(shard.offsets, np.memmap)
    assert isinstance(doc["input_ids"], np.memmap) and np.shares_memory(doc["loss_mask"], shard.mask)
    assert not doc["input_ids"].flags.writeable


def test_indexing_and_token_ranges(tmp_path, corpus):
    corpus.write(tmp_path, max_tokens=150, with_mask=True)
    ds = open_shards(tmp_path)
    np.testing.assert_array_equal(ds[-1]["input_ids"], corpus.doc(len(corpus.rec_ids) - 1))
    with pytest.raises(IndexError):
        ds[len(ds)]
    np.testing.assert_array_equal(ds.tokens(0, ds.n_tokens), corpus.flat)  # spans every shard
    np.testing.assert_array_equal(ds.tokens(140, 460), corpus.flat[140:460])
    np.testing.assert_array_equal(ds.mask_range(99, 321), corpus.mask[99:321])


def test_empty_documents_round_trip(tmp_path, info):
    with ShardWriter(tmp_path, stem_prefix="e", tokenizer_info=info, max_tokens=4) as w:
        w.add_many(np.array([5, 6, 7, 8, 9]), np.array([0, 0, 3, 3, 5]), rec_ids=list("abcd"), sources=["s"] * 4)
    ds = open_shards(tmp_path)
    assert [ds.doc_tokens(i).tolist() for i in range(4)] == [[], [5, 6, 7], [], [8, 9]]


def test_writer_rejects_bad_input(tmp_path, info):
    w = ShardWriter(tmp_path, stem_prefix="x", tokenizer_info=info)
    with pytest.raises(ShardError, match=r"\[0, 1000\)"):
        w.add(np.array([1, 1000]), rec_id="a", source="s")
    with pytest.raises(ShardError, match="offsets"):
        w.add_many(np.arange(4), np.array([0, 3, 2]), rec_ids=["a", "b"], sources=["s", "s"])
    with pytest.raises(ShardError, match="with_mask=False"):
        w.add(np.arange(3), rec_id="a", source="s", mask=np.ones(3, bool))
    with pytest.raises(ConfigError, match="fingerprint"):
        ShardWriter(tmp_path, stem_prefix="x", tokenizer_info={"name": "t", "vocab_size": 5})
    assert w.close() == []


def test_readme_worked_example_is_true(tmp_path, monkeypatch):
    readme = (Path(shards_pkg.__file__).parent / "README.md").read_text()
    code = readme.split("```python\n")[1].split("```")[0]
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    out = tmp_path / "out"
    assert (out / "sft-0000.ids").read_bytes().hex(" ") == "05 00 06 00 00 00 07 00 00 00"
    assert (out / "sft-0000.mask").read_bytes().hex(" ") == "00 01 01 01 01"
    assert np.fromfile(out / "sft-0000.idx", "<i8").tolist() == [0, 3, 5]
    doc = scope["ds"][0]
    assert doc["input_ids"].tolist() == [5, 6, 0] and doc["loss_mask"].tolist() == [False, True, True]
    assert (doc["id"], doc["source"]) == ("r1", "chat.jsonl") and scope["ds"].lengths.tolist() == [3, 2]
    header = json.loads((out / "sft-0000.json").read_text())
    assert (header["n_tokens"], header["n_trained_tokens"], header["dtype"]) == (5, 4, "uint16")
    r2 = np.memmap(out / "sft-0000.ids", dtype="<u2")[np.fromfile(out / "sft-0000.idx", "<i8")[1] :]
    assert r2.tolist() == [7, 0]


def test_failure_inside_with_leaves_no_partial_shard(tmp_path, info):
    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path, stem_prefix="f", tokenizer_info=info, max_tokens=4) as w:
            w.add(np.array([5, 6, 7, 0]), rec_id="a", source="s")
            w.add(np.array([8, 0]), rec_id="b", source="s")  # starts f-0001, never finished
            raise RuntimeError("input broke")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f-0000.docs", "f-0000.ids", "f-0000.idx", "f-0000.json"]
    assert len(open_shards(tmp_path)) == 1
