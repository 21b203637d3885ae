"""Per-message loss weights reach the shards, ``open_shards`` and the collator (the public path end to end)."""

from __future__ import annotations

import json

import chatkit as ck
import numpy as np
import pytest

from tokenmill.errors import ShardError
from tokenmill.sft.normalize import normalize_rows
from tokenmill.sft.render import render_conversation
from tokenmill.sft.run import run_sft
from tokenmill.sft.template import load_template
from tokenmill.shards import ShardWriter, open_shards, verify_shards
from tokenmill.tokenize import load_tokenizer


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return ck.build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


def _chat(cid: str, *weights) -> dict:
    """A two-exchange conversation; ``weights`` of the two assistant turns (None = no key)."""
    turns = []
    for k, w in enumerate(weights):
        turns.append({"role": "user", "content": f"Question {k} of {cid}?"})
        turns.append({"role": "assistant", "content": f"Answer {k} of {cid}, in a few words.",
                      **({} if w is None else {"loss_weight": w})})
    return {"id": cid, "messages": turns}


ROWS = [_chat("plain", None, None), _chat("quarter", None, 0.25), _chat("skip", 0.0, 2.0)]


def _run(tmp_path, tok_dir, rows, **options):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    manifest = run_sft([str(src)], out=out, tokenizer=str(tok_dir), workers=1, progress=False, verify=0, **options)
    return manifest, out


def _expected(tok_dir, rows, manifest) -> list:
    convs, _ = normalize_rows(rows, list(range(1, len(rows) + 1)), source="chats.jsonl",
                              schema=manifest["inputs"][0]["schema_used"])
    tok = load_tokenizer(tok_dir)
    return [render_conversation(c, tokenizer=tok, template=load_template()) for c in convs]


def test_fractional_weights_are_written_and_read_back(tmp_path, tok_dir):
    manifest, out = _run(tmp_path, tok_dir, ROWS)
    ds = open_shards(out)
    assert ds.has_weights and verify_shards(out) == []
    assert {s.header["format_version"] for s in ds.shards} == {2}
    for i, r in enumerate(_expected(tok_dir, ROWS, manifest)):
        doc = ds[i]
        assert doc["id"] == r.id and np.array_equal(doc["loss_mask"], r.mask)
        want = r.mask.astype(np.float32) if r.weights is None else r.weights
        np.testing.assert_array_equal(doc["loss_weights"], want)
    quarter = ds[1]["loss_weights"]
    assert set(np.unique(quarter).tolist()) == {0.0, 0.25, 1.0}  # first answer 1.0, second 0.25
    skip = ds[2]
    assert set(np.unique(skip["loss_weights"][skip["loss_mask"]]).tolist()) == {2.0}  # the 0-weight turn untrained


def test_unweighted_runs_stay_version_1(tmp_path, tok_dir):
    _, out = _run(tmp_path, tok_dir, [ROWS[0], _chat("ones", 1.0, 1.0)])
    ds = open_shards(out)
    assert not ds.has_weights and ds[0]["loss_weights"] is None
    assert {s.header["format_version"] for s in ds.shards} == {1}
    assert not list(out.glob("*.weights")) and all("has_weights" not in s.header for s in ds.shards)


def test_a_run_mixing_weighted_and_unweighted_shards(tmp_path, tok_dir):
    rows = [_chat(f"p{i}", None, None) for i in range(3)] + [_chat("w", 0.5, None)]
    _, out = _run(tmp_path, tok_dir, rows, shard_tokens=40)  # about one conversation per shard
    ds = open_shards(out)
    versions = [s.header["format_version"] for s in ds.shards]
    assert 1 in versions and 2 in versions and verify_shards(out) == []
    assert np.array_equal(ds[0]["loss_weights"], ds[0]["loss_mask"].astype(np.float32))
    assert 0.5 in ds[len(ds) - 1]["loss_weights"]


def test_collator_carries_the_weights_beside_the_labels(tmp_path, tok_dir):
    pytest.importorskip("torch")
    from tokenmill.loader import PackedCollator, PackedDataset

    _, out = _run(tmp_path, tok_dir, ROWS)
    dataset = PackedDataset(out, seq_len=512, shuffle=False)
    sample = dataset[0]
    batch = PackedCollator(pad_id=0, pad_to=512)([sample])
    weights, labels = batch["loss_weights"].numpy(), batch["labels"].numpy()
    assert weights.dtype == np.float32 and weights.shape == labels.shape
    assert (weights[labels == -100] == 0).all() and (weights[labels != -100] > 0).all()
    assert 0.25 in weights and 2.0 in weights
    ds = open_shards(out)
    firsts = np.cumsum(np.concatenate([[0], sample["seq_lens"][:-1]]))  # first token of a document: no label
    total = sum(float(ds[i]["loss_weights"].sum()) for i in range(len(ds)))
    assert weights.sum() == pytest.approx(total - float(sample["loss_weights"][firsts].sum()))


def test_collator_without_weights_has_no_weight_tensor(tmp_path, tok_dir):
    pytest.importorskip("torch")
    from tokenmill.loader import PackedCollator, PackedDataset

    _, out = _run(tmp_path, tok_dir, [ROWS[0]])
    assert "loss_weights" not in PackedCollator(pad_id=0)([PackedDataset(out, seq_len=256)[0]])


def test_writer_refuses_weights_that_contradict_the_mask(tmp_path):
    info = {"name": "toy", "fingerprint": "f00d", "vocab_size": 100, "eos_id": 0}
    with ShardWriter(tmp_path, stem_prefix="s", tokenizer_info=info, with_mask=True) as w:
        with pytest.raises(ShardError, match="exactly where the loss mask"):
            w.add(np.array([5, 6]), rec_id="a", source="x", mask=np.array([0, 1], bool), weights=[0.5, 0.5])
        with pytest.raises(ShardError, match="finite"):
            w.add(np.array([5, 6]), rec_id="a", source="x", mask=np.array([0, 1], bool), weights=[0, float("nan")])


def test_weights_beyond_float32_are_untrained_or_rejected(tmp_path, tok_dir):
    rows = [_chat("tiny", None, 1e-50), _chat("huge", None, 1e300)]
    manifest, out = _run(tmp_path, tok_dir, rows)
    assert manifest["counts"]["rejected"] == {"wrong_type": 1} and manifest["counts"]["kept"] == 1
    ds = open_shards(out)
    assert not ds.has_weights and verify_shards(out) == []  # 1e-50 is 0 in float32: that turn is untrained
    assert ds[0]["loss_mask"].sum() < _expected(tok_dir, [_chat("tiny", None, None)], manifest)[0].mask.sum()
