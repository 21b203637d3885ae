"""15.1 and 15.5: --overwrite never deletes what tokenmill did not write; one run at a time per --out."""

from __future__ import annotations

import fcntl
import json

import hostilekit as hk
import pytest

from tokenmill.errors import ConfigError


def test_overwrite_refuses_the_folder_holding_the_input(tmp_path):
    data = hk.docs(tmp_path / "corpus.jsonl", 5)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds the input"):
        hk.pretrain([data], tmp_path, overwrite=True)
    assert data.is_file() and (tmp_path / "notes.txt").read_text() == "mine"


def test_overwrite_refuses_a_directory_tokenmill_did_not_write(tmp_path):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 5)
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    with pytest.raises(ConfigError, match="not a tokenmill output"):
        hk.pretrain([data], out, overwrite=True)
    assert (out / "thesis.tex").read_text() == "years of work"
    assert not (out / "_state").exists()  # not even a lock file was left in a directory it refused


def test_overwrite_clears_only_what_tokenmill_wrote(tmp_path):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 5)
    out = tmp_path / "out"
    hk.pretrain([data], out)
    (out / "README.txt").write_text("kept")
    (out / "shard-999999-0000.ids").write_bytes(b"mine")  # a name tokenmill writes, but no run wrote it: kept
    manifest = hk.pretrain([data], out, overwrite=True, shard_tokens=1 << 20)
    assert (out / "README.txt").read_text() == "kept"
    assert (out / "shard-999999-0000.ids").read_bytes() == b"mine"
    assert manifest["counts"]["kept"] == 5


def test_out_inside_an_input_directory_is_refused(tmp_path):
    hk.docs(tmp_path / "in" / "a.jsonl", 5)
    with pytest.raises(ConfigError, match="inside the input directory"):
        hk.pretrain([tmp_path / "in"], tmp_path / "in" / "shards")
    assert not (tmp_path / "in" / "shards").exists()


def test_out_that_is_a_file_is_a_clear_error(tmp_path):
    data = hk.docs(tmp_path / "a.jsonl", 5)
    target = tmp_path / "out.bin"
    target.write_bytes(b"x")
    result = hk.cli("pretrain", data, "--out", target, "--workers", "1", "--no-progress", "--overwrite")
    assert result.returncode != 0
    assert "is a file, not a directory" in result.stderr and "Traceback" not in result.stderr
    assert target.read_bytes() == b"x"


def test_a_second_run_into_a_locked_out_is_refused(tmp_path):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 5)
    out = tmp_path / "out"
    (out / "_state").mkdir(parents=True)
    with open(out / "_state" / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # what a running tokenmill holds for the whole run
        held.write("4242")
        held.flush()
        with pytest.raises(ConfigError, match=r"in use by another tokenmill run \(pid 4242\)"):
            hk.pretrain([data], out)
    assert not (out / "manifest.json").exists()
    hk.pretrain([data], out)  # released: the run goes ahead
    assert json.loads((out / "manifest.json").read_text())["counts"]["kept"] == 5


def test_staging_directories_are_private_to_one_run(tmp_path):
    """Two runs never share a unit's staging directory, even when both reach the engine."""
    from tokenmill.engine import StageState, Unit

    unit = Unit(0, "unit-000000")
    first, second = StageState(tmp_path / "out", "shards_v1"), StageState(tmp_path / "out", "shards_v1")
    assert first.staging(unit) != second.staging(unit)
    assert first.staging(unit).parent.parent == tmp_path / "out" / "_state" / "shards_v1" / "tmp"
