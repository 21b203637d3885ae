"""verify_shards finds corruption; open_shards refuses incomplete shards."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokenmill.errors import ShardError
from tokenmill.shards import open_shards, verify_shards


@pytest.fixture
def shard_dir(tmp_path, corpus):
    corpus.write(tmp_path, with_mask=True, max_tokens=500)
    return tmp_path


def _patch(path, offset: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset : offset + len(data)] = data
    path.write_bytes(bytes(raw))


def test_sound_shards_have_no_problems(shard_dir):
    assert verify_shards(shard_dir) == []
    assert len(open_shards(shard_dir, verify=True)) == 60


def test_flipped_byte_is_a_checksum_mismatch(shard_dir):
    path = shard_dir / "part-0001.ids"
    raw = bytearray(path.read_bytes())
    raw[10] ^= 0x01
    path.write_bytes(bytes(raw))
    problems = verify_shards(shard_dir)
    assert problems == ["part-0001: checksum mismatch in part-0001.ids: the file changed after it was written"]
    with pytest.raises(ShardError, match="checksum mismatch"):
        open_shards(shard_dir, verify=True)


def test_out_of_vocab_id_is_found(shard_dir):
    _patch(shard_dir / "part-0000.ids", 2 * 5, np.array([1000], "<u2").tobytes())
    problems = verify_shards(shard_dir)
    assert "part-0000: token id 1000 >= vocab_size 1000 (first at token 5)" in problems


def test_truncated_mask_is_found_and_refused_at_open(shard_dir):
    path = shard_dir / "part-0000.mask"
    path.write_bytes(path.read_bytes()[:-3])
    n_ids = (shard_dir / "part-0000.ids").stat().st_size // 2
    problems = verify_shards(shard_dir)
    assert f"part-0000: mask length {n_ids - 3} != ids length {n_ids}" in problems
    assert any("checksum mismatch in part-0000.mask" in p for p in problems)
    with pytest.raises(ShardError, match="part-0000.mask has"):
        open_shards(shard_dir)


def test_bad_offsets_are_found(shard_dir):
    idx = shard_dir / "part-0000.idx"
    offsets = np.fromfile(idx, "<i8")
    offsets[2], offsets[-1] = offsets[3] + 1, offsets[-1] - 1
    offsets.tofile(idx)
    problems = verify_shards(shard_dir)
    assert "part-0000: offsets are not monotonic (a document has a negative length)" in problems
    assert any(p.startswith("part-0000: offsets end at") for p in problems)


def test_non_binary_mask_and_wrong_trained_count(shard_dir):
    _patch(shard_dir / "part-0000.mask", 0, b"\x07")
    assert "part-0000: mask holds values other than 0 and 1" in verify_shards(shard_dir)
    mask = np.fromfile(shard_dir / "part-0001.mask", np.uint8)
    zero = int(np.flatnonzero(mask == 0)[0])
    _patch(shard_dir / "part-0001.mask", zero, b"\x01")
    claimed = json.loads((shard_dir / "part-0001.json").read_text())["n_trained_tokens"]
    expected = f"part-0001: mask trains {claimed + 1} tokens but the header says n_trained_tokens={claimed}"
    assert expected in verify_shards(shard_dir)


def test_fingerprint_mismatch_between_shards(shard_dir):
    path = shard_dir / "part-0001.json"
    header = json.loads(path.read_text())
    header["tokenizer_fingerprint"] = "fp-forged"
    path.write_text(json.dumps(header))
    problems = verify_shards(shard_dir)
    assert "part-0001.json and part-0000.json disagree on tokenizer_fingerprint: 'fp-forged' vs 'fp-toy-1'" in problems


def test_missing_file_and_unreadable_docs(shard_dir):
    (shard_dir / "part-0002.docs").write_bytes(b"not arrow")
    (shard_dir / "part-0001.idx").unlink()
    problems = verify_shards(shard_dir)
    assert "part-0001: file part-0001.idx is missing" in problems
    assert any(p.startswith("part-0002: part-0002.docs is not a readable Arrow IPC file") for p in problems)
    with pytest.raises(ShardError, match="part-0001.idx is missing"):
        open_shards(shard_dir)
