"""One worker or two: identical bytes, for both tracks."""

from __future__ import annotations

import json

import trackkit as tk

from tokenmill.cli import main
from tokenmill.shards import open_shards, verify_shards


def forget_sft_verdicts() -> None:
    """Empty the cached SFT parity verdicts (sft/verdicts.py)."""
    import shutil

    from tokenmill.tokenize.sources import cache_dir

    shutil.rmtree(cache_dir() / "parity-sft", ignore_errors=True)


def run(track: str, src, out, workers: int, *extra: str) -> None:
    args = [track, str(src), "--out", str(out), "--workers", str(workers), "--unit-bytes", "4KB", "--no-progress"]
    assert main(args + list(extra)) == 0


def test_pretrain_one_and_two_workers_write_the_same_bytes(tmp_path):
    src = tmp_path / "docs.jsonl"
    texts = tk.write_docs(src, 300, seed=3, broken_every=41)
    run("pretrain", src, tmp_path / "w1", 1, "--shard-tokens", "500")
    run("pretrain", src, tmp_path / "w2", 2, "--shard-tokens", "500")
    tk.assert_same_output(tmp_path / "w1", tmp_path / "w2")
    shards = open_shards(tmp_path / "w1")
    assert len(shards) == len(texts)
    assert len(shards.shards) > 10  # many units, and units split by --shard-tokens
    assert verify_shards(tmp_path / "w1") == []
    assert [shards[i]["id"] for i in range(len(shards))] == [f"doc-{i}" for i in range(len(texts))]
    manifest = json.loads((tmp_path / "w1" / "manifest.json").read_text())
    assert manifest["counts"]["rejected"] == {"malformed_json": 300 // 41}
    assert manifest["run"]["units"] > 10


def test_sft_one_and_two_workers_write_the_same_bytes(tmp_path):
    src = tmp_path / "chats.jsonl"
    rows = tk.write_chats(src, 120, seed=5, broken_every=50)
    run("sft", src, tmp_path / "w1", 1, "--verify", "2")
    forget_sft_verdicts()  # the second run checks what the first did, so their parity reports agree too
    run("sft", src, tmp_path / "w2", 2, "--verify", "2")
    tk.assert_same_output(tmp_path / "w1", tmp_path / "w2")
    shards = open_shards(tmp_path / "w1")
    assert len(shards) == len(rows) and shards.has_mask
    assert verify_shards(tmp_path / "w1") == []
    manifest = json.loads((tmp_path / "w1" / "manifest.json").read_text())
    assert manifest["run"]["units"] > 5
    assert manifest["report"]["parity"]["checked"] >= manifest["run"]["units"]
