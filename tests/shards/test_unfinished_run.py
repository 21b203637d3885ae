"""A run writes manifest.json last: a run directory without one is unfinished (killed or still running).
`audit` says so and exits 1; `open_shards` and `PackedDataset` refuse it unless allow_partial=True."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

from tokenmill.cli import main
from tokenmill.errors import ShardError
from tokenmill.loader import PackedDataset
from tokenmill.shards import ShardWriter, open_shards

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))
import trackkit as tk


@pytest.fixture
def killed(tmp_path) -> Path:
    """A finished run with its manifest taken away: what a kill after the last unit's commit leaves."""
    src = tmp_path / "docs.jsonl"
    tk.write_docs(src, 40)
    out = tmp_path / "run"
    assert main(["pretrain", str(src), "--out", str(out), "--workers", "1", "--no-progress", "--tokenizer", "default"]) == 0
    (out / "manifest.json").unlink()
    return out


def test_open_shards_refuses_an_unfinished_run_unless_asked(killed):
    with pytest.raises(ShardError, match="unfinished run"):
        open_shards(killed)
    partial = open_shards(killed, allow_partial=True)
    assert partial.n_docs == 40
    assert pickle.loads(pickle.dumps(partial)).n_docs == 40  # a worker reopens it the same way


def test_packed_dataset_refuses_an_unfinished_run_unless_asked(killed):
    with pytest.raises(ShardError, match="unfinished run"):
        PackedDataset(killed, seq_len=64)
    assert len(PackedDataset(killed, seq_len=64, allow_partial=True)) > 0


def test_audit_says_unfinished_and_exits_1(killed, capsys):
    assert main(["audit", str(killed)]) == 1
    out = capsys.readouterr().out
    assert "unfinished run" in out and "OK: no problems found" not in out
    assert "40" in out  # what the finished units hold is still shown


def test_shards_written_without_a_run_are_read_as_before(tmp_path):
    import numpy as np

    from tokenmill.tokenize import load_tokenizer

    tok = load_tokenizer("default")
    with ShardWriter(tmp_path / "plain", stem_prefix="pretrain", tokenizer_info=tok.info()) as w:
        w.add(np.array([1, 2, 3], dtype=np.int64), rec_id="a", source="s")
    assert open_shards(tmp_path / "plain").n_docs == 1  # no _state/: a directory of shards, not a run
