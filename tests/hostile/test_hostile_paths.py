"""15.9, 15.10 and 15.12: odd entries in an input directory are skipped and named; odd names work."""

from __future__ import annotations

import json
import os

import hostilekit as hk
import pytest

from tokenmill.errors import InputError


def _manifest(out):
    return json.loads((out / "manifest.json").read_text())


def test_a_named_pipe_in_an_input_directory_is_skipped_and_named(tmp_path):
    hk.docs(tmp_path / "in" / "a.jsonl", 5)
    os.mkfifo(tmp_path / "in" / "pipe.jsonl")  # reading it would block forever
    manifest = hk.pretrain([tmp_path / "in"], tmp_path / "out")
    assert manifest["counts"]["kept"] == 5
    assert {"path": str(tmp_path / "in" / "pipe.jsonl"), "reason": "named_pipe"} in manifest["skipped_inputs"]


def test_a_device_given_as_input_is_a_clear_error(tmp_path):
    result = hk.cli("pretrain", "/dev/zero", "--out", tmp_path / "out", "--no-progress", timeout=60)
    assert result.returncode != 0 and "not a regular file" in result.stderr and "Traceback" not in result.stderr


def test_symlink_loops_and_dangling_links_are_skipped_and_named(tmp_path):
    hk.docs(tmp_path / "in" / "a.jsonl", 5)
    os.symlink(tmp_path / "in" / "loop1.jsonl", tmp_path / "in" / "loop2.jsonl")
    os.symlink(tmp_path / "in" / "loop2.jsonl", tmp_path / "in" / "loop1.jsonl")
    os.symlink(tmp_path / "gone.jsonl", tmp_path / "in" / "dangling.jsonl")
    manifest = hk.pretrain([tmp_path / "in"], tmp_path / "out")
    reasons = {os.path.basename(s["path"]): s["reason"] for s in manifest["skipped_inputs"]}
    assert reasons == {"dangling.jsonl": "dangling_symlink", "loop1.jsonl": "symlink_loop",
                       "loop2.jsonl": "symlink_loop"}
    assert manifest["counts"]["kept"] == 5


def test_a_dangling_link_given_directly_is_a_clear_error(tmp_path):
    os.symlink(tmp_path / "gone.jsonl", tmp_path / "link.jsonl")
    with pytest.raises(InputError, match="dangling symbolic link"):
        hk.pretrain([tmp_path / "link.jsonl"], tmp_path / "out")


WRITE_ONLY = "/proc/sys/vm/compact_memory"  # no one may read it, root included


def test_an_unreadable_file_is_a_clear_error(tmp_path):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 5)
    if os.geteuid() == 0:
        if not os.path.exists(WRITE_ONLY):
            pytest.skip("root reads every file, and no write-only file is at hand")
        os.symlink(WRITE_ONLY, tmp_path / "in" / "b.jsonl")
    else:
        data.chmod(0)
    result = hk.cli("pretrain", tmp_path / "in", "--out", tmp_path / "out", "--no-progress")
    assert result.returncode != 0 and "cannot be read" in result.stderr and "Traceback" not in result.stderr


def test_a_non_utf8_file_name_is_read_and_shown_escaped(tmp_path):
    (tmp_path / "in").mkdir()
    name = os.path.join(os.fsencode(tmp_path / "in"), b"caf\xe9.jsonl")
    with open(name, "w") as fh:
        fh.write(json.dumps({"text": "a document in a badly named file"}) + "\n{broken\n")
    manifest = hk.pretrain([tmp_path / "in"], tmp_path / "out")
    assert manifest["counts"]["kept"] == 1 and manifest["counts"]["rejected"] == {"malformed_json": 1}
    assert hk.rejects(tmp_path / "out")[0]["source"] == "caf\\xe9.jsonl"


def test_an_endless_line_is_rejected_without_holding_it(tmp_path, monkeypatch):
    from tokenmill.io import jsonfmt

    monkeypatch.setattr(jsonfmt, "MAX_RECORD_BYTES", 1 << 20)
    path = tmp_path / "in" / "a.jsonl"
    hk.docs(path, 3)
    with open(path, "ab") as fh:
        fh.write(b'{"text": "' + b"z" * (8 << 20))  # 8 MB and no newline: an endless line, scaled down
    manifest = hk.pretrain([path], tmp_path / "out", force=True)
    assert manifest["counts"]["kept"] == 3 and manifest["counts"]["rejected"] == {"too_long": 1}


def test_underscore_files_skipped_are_named_in_the_manifest(tmp_path):
    hk.docs(tmp_path / "in" / "a.jsonl", 5)
    hk.docs(tmp_path / "in" / "_draft.jsonl", 5, start=100)
    (tmp_path / "in" / "_SUCCESS").write_text("")
    manifest = hk.pretrain([tmp_path / "in"], tmp_path / "out")
    skipped = {os.path.basename(s["path"]): s["reason"] for s in manifest["skipped_inputs"]}
    assert skipped == {"_draft.jsonl": "hidden_or_underscore", "_SUCCESS": "hidden_or_underscore"}


def test_a_file_literally_named_like_a_glob_can_be_given(tmp_path):
    path = hk.docs(tmp_path / "in" / "[1].jsonl", 4)
    hk.docs(tmp_path / "in" / "1.jsonl", 9, start=50)  # what the glob [1].jsonl would match instead
    assert hk.pretrain([path], tmp_path / "out")["counts"]["kept"] == 4


def test_an_old_output_inside_an_input_directory_is_never_read_back(tmp_path):
    hk.docs(tmp_path / "in" / "a.jsonl", 5)
    hk.pretrain([tmp_path / "in"], tmp_path / "elsewhere")
    (tmp_path / "elsewhere").rename(tmp_path / "in" / "shards")  # an earlier run's output moved in
    manifest = hk.pretrain([tmp_path / "in"], tmp_path / "out")
    assert manifest["counts"]["input"] == 5
    assert {"path": str(tmp_path / "in" / "shards"), "reason": "tokenmill_output"} in manifest["skipped_inputs"]


def test_a_directory_symlink_loop_is_walked_once_and_the_cycle_named(tmp_path):
    hk.docs(tmp_path / "in" / "a.jsonl", 50)
    (tmp_path / "in" / "sub").mkdir()
    os.symlink("..", tmp_path / "in" / "sub" / "loop")  # sub/loop -> in: read again and again, 40 levels deep
    os.symlink(tmp_path / "in" / "sub", tmp_path / "in" / "zagain")  # a second way into sub
    manifest = hk.pretrain([tmp_path / "in"], tmp_path / "out")
    assert manifest["counts"]["kept"] == 50
    assert {"path": str(tmp_path / "in" / "sub" / "loop"), "reason": "symlink_cycle"} in manifest["skipped_inputs"]
    assert {"path": str(tmp_path / "in" / "zagain"), "reason": "directory_already_walked"} in manifest["skipped_inputs"]
    result = hk.cli("curate", tmp_path / "in", "--out", tmp_path / "cur", "--preset", "none", "--workers", "1",
                    "--no-progress")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "cur" / "manifest.json").read_text())["counts"]["input"] == 50
