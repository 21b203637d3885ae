"""What "byte-identical after resume" covers, exactly: every file outside ``_state/`` except manifest.json,
and manifest.json apart from its ``run`` object (timings, peak memory). SFT track; pretrain's kill -9 test
is in test_track_resume.py."""

from __future__ import annotations

import json
from pathlib import Path

import trackkit as tk

import statekit
from tokenmill.sft.run import run_sft

TIMINGS = {"run"}  # the only manifest key allowed to differ


def run(src: Path, out: Path) -> dict:
    return run_sft([str(src)], out=out, tokenizer="default", workers=1, verify=0, unit_bytes=4096, progress=False)


def interrupt(out: Path, keep: int) -> None:
    """What a run killed after ``keep`` committed units leaves: those units' files and markers, nothing else."""
    (out / "manifest.json").unlink()
    (out / "rejects.jsonl").unlink(missing_ok=True)
    for marker in sorted(statekit.reopen(out, "shards_v1").iterdir())[keep:]:
        unit = marker.stem
        for f in out.glob(f"shard-{unit.split('-')[-1]}*"):
            f.unlink()
        marker.unlink()


def test_sft_resume_gives_byte_identical_files_and_manifest_but_its_timings(tmp_path):
    src = tmp_path / "chats.jsonl"
    tk.write_chats(src, 120, broken_every=17)
    reference = tmp_path / "reference"
    run(src, reference)
    resumed = tmp_path / "resumed"
    run(src, resumed)
    units = len(statekit.committed(resumed, "shards_v1"))
    assert units >= 4
    interrupt(resumed, keep=units // 2)
    assert len(list(resumed.glob("shard-*.ids"))) < len(list(reference.glob("shard-*.ids")))
    run(src, resumed)

    files = tk.output_files(reference)
    assert files == tk.output_files(resumed) and "rejects.jsonl" in files and any(".ids" in f for f in files)
    a, b = (json.loads((d / "manifest.json").read_text()) for d in (reference, resumed))
    assert {k for k in a if a[k] != b.get(k)} <= TIMINGS and a.keys() == b.keys()
    assert set(a["run"]) == {"seconds", "peak_rss", "units", "step_seconds", "stage_seconds", "engine"}
    assert a["run"]["engine"] == b["run"]["engine"] and a["run"]["units"] == b["run"]["units"]


def test_the_readme_says_which_files_are_identical():
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    assert "every file outside `_state/`" in readme and "`run` object" in readme
