"""15.4: an input that changes during a run, or between a kill and the resume, is an error, never a mix."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import hostilekit as hk
import pytest

import statekit
from tokenmill.errors import InputError


@dataclass(frozen=True)
class ShrinkOnce:
    """A curation step that truncates an input the first time it runs: a writer racing the run."""

    path: str
    flag: str

    def __call__(self, batch):
        if not os.path.exists(self.flag):
            Path(self.flag).write_text("done")
            with open(self.path, "r+b") as fh:
                fh.truncate(os.path.getsize(self.path) // 3)
        return batch, {}


def test_a_file_shrunk_mid_run_is_an_error(tmp_path):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 600)
    step = ShrinkOnce(str(data), str(tmp_path / "flag"))
    with pytest.raises(InputError, match="shrank|changed"):
        hk.pretrain([data], tmp_path / "out", unit_bytes=8 << 10, steps=[step])
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_same_size_edit_between_kill_and_resume_is_refused(tmp_path):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 400)
    out = tmp_path / "out"
    hk.pretrain([data], out, unit_bytes=4 << 10)
    markers = sorted(statekit.reopen(out, "shards_v1").glob("*.json"))
    assert len(markers) > 2
    for marker in markers[len(markers) // 2:]:
        marker.unlink()  # what a kill -9 half way leaves: half the units committed
    (out / "manifest.json").unlink()
    body = data.read_bytes()
    data.write_bytes(body.replace(b"word399x0", b"WORD399X0"))  # same size, other bytes
    assert len(data.read_bytes()) == len(body)
    with pytest.raises(InputError, match=r"changed since this run started \(.*content"):
        hk.pretrain([data], out, unit_bytes=4 << 10)
    assert not (out / "manifest.json").exists()


def test_a_touched_file_is_refused_on_resume_and_overwrite_starts_again(tmp_path):
    data = hk.docs(tmp_path / "in" / "a.jsonl", 50)
    out = tmp_path / "out"
    hk.pretrain([data], out)
    st = data.stat()
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(InputError, match="modification time"):
        hk.pretrain([data], out)
    assert hk.pretrain([data], out, overwrite=True)["counts"]["kept"] == 50
