"""15.2: a truncated compressed input is counted as unreadable, never silently shorter."""

from __future__ import annotations

import io
import json

import hostilekit as hk
import pytest
import zstandard


def _lines(start: int, n: int) -> bytes:
    return b"".join(json.dumps({"id": f"d{i}", "text": f"document number {i} " * 20}).encode() + b"\n"
                    for i in range(start, start + n))


def _two_frames(path, *, cut: int) -> None:
    comp = zstandard.ZstdCompressor()
    data = comp.compress(_lines(0, 25)) + comp.compress(_lines(25, 25))
    path.write_bytes(data[:len(data) - cut])


@pytest.mark.parametrize("cut", [1, 7, 40])
def test_two_frames_with_the_second_cut(tmp_path, cut):
    src = tmp_path / "in" / "docs.jsonl.zst"
    src.parent.mkdir()
    _two_frames(src, cut=cut)
    manifest = hk.pretrain([src], tmp_path / "out")
    counts = manifest["counts"]
    assert counts["rejected"].get("unreadable", 0) >= 1, counts
    assert counts["kept"] < 50
    assert counts["input"] == counts["kept"] + sum(counts["rejected"].values())


def test_one_frame_cut_in_half(tmp_path):
    src = tmp_path / "in" / "docs.jsonl.zst"
    src.parent.mkdir()
    _two_frames(src, cut=0)  # the whole file first: every record, no reject
    assert hk.pretrain([src], tmp_path / "whole")["counts"]["kept"] == 50
    assert hk.rejects(tmp_path / "whole") == []
    data = zstandard.ZstdCompressor().compress(_lines(0, 50))
    src.write_bytes(data[: len(data) // 2])
    manifest = hk.pretrain([src], tmp_path / "out", force=True)  # nothing readable: the router calls it unknown
    assert manifest["counts"]["input"] >= 1
    assert "unreadable" in hk.reasons(tmp_path / "out")
    assert any("truncated" in r["detail"] for r in hk.rejects(tmp_path / "out"))


def test_a_streamed_frame_without_content_size_cut(tmp_path):
    """Frames written by a streaming compressor (no content size, many blocks), cut inside a block."""
    src = tmp_path / "in" / "docs.jsonl.zst"
    src.parent.mkdir()
    buf = io.BytesIO()
    with zstandard.ZstdCompressor(level=1).stream_writer(buf, closefd=False) as w:
        w.write(_lines(0, 2000))
    data = buf.getvalue()
    src.write_bytes(data[: len(data) * 3 // 4])
    manifest = hk.pretrain([src], tmp_path / "out")
    assert manifest["counts"]["rejected"].get("unreadable", 0) == 1
    assert 0 < manifest["counts"]["kept"] < 2000


def test_truncated_zstd_json_array_is_counted(tmp_path):
    src = tmp_path / "in" / "docs.json.zst"
    src.parent.mkdir()
    rows = [{"id": f"d{i}", "text": f"text {i} " * 30} for i in range(200)]
    data = zstandard.ZstdCompressor().compress(json.dumps(rows).encode())
    src.write_bytes(data[: len(data) - 5])
    manifest = hk.pretrain([src], tmp_path / "out", force=True)  # nothing readable: the router calls it unknown
    assert "unreadable" in manifest["counts"]["rejected"], manifest["counts"]
