"""Golden outputs: both tracks on a fixed small input write exactly the bytes recorded in ``golden/``.

The digests were taken from the code as it stood before the engine became a workflow of stages, so a
refactor of the engine that changes one byte of a shard, a rejects line or the manifest fails here. Every
output file counts, ``manifest.json`` included, apart from its timings (``run.seconds``, ``run.peak_rss``,
``run.step_seconds``, ``run.stage_seconds``) and the absolute input directory (replaced by ``<in>``). The
pipeline file a run records (``pipeline_file``: its temporary path and digest, in the manifest and the data
card) is checked apart and left out of the digests.

When an output change is intended (a new shard field, say), regenerate with
``TOKENMILL_UPDATE_GOLDEN=1 pytest tests/track/test_track_golden.py`` and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import trackkit as tk

from tokenmill.cli import main

GOLDEN = Path(__file__).parent / "golden"
PIPELINE = "track: pretrain\nsteps:\n  - name: length\n    min_chars: 60\n"


def digests(out: Path, inputs: Path) -> dict[str, str]:
    """sha256 of every output file outside ``_state/``; the manifest without timings or the input dir."""
    files = tk.output_files(out)
    manifest = json.loads((out / "manifest.json").read_text())
    recorded = manifest.pop("pipeline_file", None)
    if recorded is not None:  # the run's pipeline file: a temporary path, checked by the test that gave one
        files["datacard.json"] = _without_pipeline(json.loads(files["datacard.json"]))
        files["datacard.md"] = files["datacard.md"].replace(
            f"\n\nPipeline file: `{recorded['path']}` (sha256 `{recorded['sha256']}`)".encode(), b"")
    found = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    manifest["run"].pop("seconds")
    manifest["run"].pop("peak_rss")
    manifest["run"].pop("step_seconds", None)
    manifest["run"].pop("stage_seconds", None)  # timings of the stages, in the envelope every job writes
    text = json.dumps(manifest, sort_keys=True).replace(str(inputs), "<in>")
    found["manifest.json"] = hashlib.sha256(text.encode()).hexdigest()
    return dict(sorted(found.items()))


def _without_pipeline(card: dict) -> bytes:
    card.pop("pipeline_file")
    return json.dumps(card, indent=2, default=str).encode() + b"\n"


def check(track: str, found: dict[str, str]) -> None:
    path = GOLDEN / f"{track}.json"
    if os.environ.get("TOKENMILL_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(found, indent=1) + "\n")
    expected = json.loads(path.read_text())
    assert sorted(found) == sorted(expected), "other output files than the golden run"
    differing = [name for name in expected if found[name] != expected[name]]
    assert not differing, f"{track}: bytes differ from the golden run in {differing}"


def test_pretrain_output_matches_golden(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    tk.write_docs(src / "docs.jsonl", 240, seed=11, broken_every=37)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    out = tmp_path / "out"
    args = ["pretrain", str(src / "docs.jsonl"), "--out", str(out), "--config", str(tmp_path / "pipeline.yaml"),
            "--workers", "1", "--unit-bytes", "4KB", "--shard-tokens", "700", "--no-progress"]
    assert main(args) == 0
    recorded = json.loads((out / "manifest.json").read_text())["pipeline_file"]
    assert recorded == {"path": str(tmp_path / "pipeline.yaml"), "sha256": hashlib.sha256(PIPELINE.encode()).hexdigest()}
    found = digests(out, src)
    assert len(found) > 20  # several units, several shards each, rejects and the manifest
    check("pretrain", found)


def test_sft_output_matches_golden(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    tk.write_chats(src / "chats.jsonl", 80, seed=13, broken_every=30)
    out = tmp_path / "out"
    args = ["sft", str(src / "chats.jsonl"), "--out", str(out), "--workers", "1", "--unit-bytes", "4KB",
            "--verify", "0", "--seq-len", "128", "--no-progress"]
    assert main(args) == 0
    found = digests(out, src)
    assert len(found) > 10
    check("sft", found)


@pytest.mark.parametrize("track", ["pretrain", "sft"])
def test_golden_files_are_committed(track):
    assert (GOLDEN / f"{track}.json").is_file(), "golden digests missing: they must come from a known-good run"


def check_files(track: str, found: dict[str, str]) -> None:
    """Every output file but the manifest (whose counters say what was checked) has its golden bytes."""
    expected = {k: v for k, v in json.loads((GOLDEN / f"{track}.json").read_text()).items() if k != "manifest.json"}
    found = {k: v for k, v in found.items() if k != "manifest.json"}
    assert sorted(found) == sorted(expected), "other output files than the golden run"
    differing = [name for name in expected if found[name] != expected[name]]
    assert not differing, f"{track}: bytes differ from the golden run in {differing}"


def test_sft_golden_bytes_with_checks_workers_and_cached_verdicts(tmp_path):
    """Checked against apply_chat_template, by 2 workers (fast encoder built by the fork server), then again
    with the verdicts cached (no reference built): the golden bytes each time."""
    pytest.importorskip("transformers")
    src = tmp_path / "in"
    src.mkdir()
    tk.write_chats(src / "chats.jsonl", 80, seed=13, broken_every=30)
    checked = []
    for run in ("first", "cached"):
        out = tmp_path / run
        args = ["sft", str(src / "chats.jsonl"), "--out", str(out), "--workers", "2", "--unit-bytes", "4KB",
                "--seq-len", "128", "--no-progress"]
        assert main(args) == 0
        check_files("sft", digests(out, src))
        checked.append(json.loads((out / "manifest.json").read_text())["report"]["parity"]["checked"])
    assert checked[0] > 0 and checked[1] == 0


def test_pretrain_golden_bytes_with_workers_and_cached_verdict(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    tk.write_docs(src / "docs.jsonl", 240, seed=11, broken_every=37)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    for run in ("first", "cached"):
        out = tmp_path / run
        args = ["pretrain", str(src / "docs.jsonl"), "--out", str(out), "--config", str(tmp_path / "pipeline.yaml"),
                "--workers", "2", "--unit-bytes", "4KB", "--shard-tokens", "700", "--no-progress"]
        assert main(args) == 0
        check_files("pretrain", digests(out, src))
