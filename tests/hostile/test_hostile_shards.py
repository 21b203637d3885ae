"""15.6 and 14.3: no shard vanishes without a word; stats and export refuse corrupt shards (cheaply)."""

from __future__ import annotations

import os
from pathlib import Path

import hostilekit as hk
import pytest

import tokenmill
from tokenmill.errors import ConfigError, ShardError
from tokenmill.shards.audit import audit
from tokenmill.shards.export import export


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("made")
    out = root / "shards"
    hk.pretrain([hk.docs(root / "in" / "a.jsonl", 300)], out, unit_bytes=6 << 10)
    assert len(list(out.glob("shard-*.json"))) >= 3
    return out


@pytest.fixture
def shards(made, tmp_path):
    import shutil

    return Path(shutil.copytree(made, tmp_path / "shards"))


def _second(out):
    return sorted(out.glob("shard-*.json"))[1]


def test_a_missing_header_is_a_problem_everywhere(shards, tmp_path):
    _second(shards).unlink()
    with pytest.raises(ShardError, match="header .* is missing"):
        tokenmill.open_shards(shards)
    assert any("is missing" in p for p in audit(shards, n=0)["problems"])
    with pytest.raises(ShardError):
        export(shards, to="bin", out=tmp_path / "x.bin")


def test_an_unparsable_header_is_a_problem(shards):
    _second(shards).write_text("{ not json")
    with pytest.raises(ShardError, match="not a readable tokenmill shard header"):
        tokenmill.open_shards(shards)
    result = audit(shards, n=0)
    assert result["problems"] and len([p for p in result["problems"] if "readable tokenmill" in p]) == 1


def test_a_shard_the_manifest_does_not_list_is_a_problem(shards, tmp_path):
    other = tmp_path / "other"
    hk.pretrain([hk.docs(tmp_path / "in2" / "b.jsonl", 5, start=9000)], other, shard_tokens=1 << 20)
    for path in other.glob("shard-000000-0000.*"):
        path.rename(shards / path.name.replace("shard-000000", "shard-000777"))
    with pytest.raises(ShardError, match="not listed in manifest.json"):
        tokenmill.open_shards(shards)


def test_counts_must_match_the_manifest(shards):
    import json

    manifest = json.loads((shards / "manifest.json").read_text())
    manifest["counts"]["kept"] += 7
    (shards / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardError, match="counts"):
        tokenmill.open_shards(shards)


def test_a_corrupt_docs_file_raises_shard_error(shards):
    docs = sorted(shards.glob("shard-*.docs"))[0]
    docs.write_bytes(b"\0" * docs.stat().st_size)
    ds = tokenmill.open_shards(shards)
    with pytest.raises(ShardError, match="not a readable Arrow IPC file"):
        ds[0]


def test_stats_and_export_verify_checksums_once_per_file(shards, tmp_path, monkeypatch):
    from tokenmill.loader.stats import shard_stats
    from tokenmill.shards import checked

    monkeypatch.setenv("TOKENMILL_CACHE", str(tmp_path / "cache"))
    hashed = []
    real = checked.file_digest
    monkeypatch.setattr(checked, "file_digest", lambda p: hashed.append(p) or real(p))
    shard_stats(shards)
    first = len(hashed)
    assert first >= 12  # every file of every shard
    shard_stats(shards)
    export(shards, to="bin", out=tmp_path / "x.bin")
    assert len(hashed) == first  # cached by size and mtime: not read again
    ids = sorted(shards.glob("shard-*.ids"))[1]
    data = bytearray(ids.read_bytes())
    data[10] ^= 0xFF  # same size; the mtime moves on
    ids.write_bytes(bytes(data))
    os.utime(ids, ns=(ids.stat().st_atime_ns, ids.stat().st_mtime_ns + 10**9))
    with pytest.raises(ShardError, match="checksum mismatch"):
        shard_stats(shards)
    with pytest.raises(ShardError, match="checksum mismatch"):
        export(shards, to="bin", out=tmp_path / "y.bin")


def test_export_seq_len_longer_than_the_corpus_is_an_error(shards, tmp_path):
    with pytest.raises(ConfigError, match="longer than all"):
        export(shards, to="bin", out=tmp_path / "x.bin", seq_len=10**9)
    result = hk.cli("export", shards, "--to", "bin", "--out", tmp_path / "y.bin", "--seq-len", str(10**9))
    assert result.returncode != 0 and "longer than all" in result.stderr
