"""The data card names the pipeline file a run was configured by and its sha256 digest (not only the command
line, which names a path whose contents may change afterwards)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tokenmill.cli import main


def _pipeline(tmp_path: Path, command: str) -> Path:
    docs = tmp_path / "in" / "docs.jsonl"
    docs.parent.mkdir(parents=True)
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Document {i} about rivers and hills. " * 5}) + "\n"
                            for i in range(6)))
    pipe = tmp_path / "pipe.yaml"
    pipe.write_text(f"track: {command}\ninputs: [{docs}]\nout: {tmp_path / 'out'}\n"
                    + ("preset: none\n" if command == "curate" else "tokenizer: default\n"))
    return pipe


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_card_names_the_pipeline_file_and_its_digest(tmp_path):
    from huggingface_hub import DatasetCard

    pipe = _pipeline(tmp_path, "curate")
    assert main(["curate", "--config", str(pipe), "--workers", "1", "--no-progress"]) == 0
    out = tmp_path / "out"
    expected = {"path": str(pipe), "sha256": _digest(pipe)}
    assert json.loads((out / "manifest.json").read_text())["pipeline_file"] == expected
    assert json.loads((out / "datacard.json").read_text())["pipeline_file"] == expected
    text = (out / "datacard.md").read_text()
    assert f"`{pipe}` (sha256 `{expected['sha256']}`)" in text
    assert DatasetCard.load(out / "datacard.md").data.pretty_name == "tokenmill curate output"
    pipe.write_text(pipe.read_text() + "# edited afterwards\n")  # the card keeps the digest of what ran
    assert main(["card", str(out)]) == 0
    assert json.loads((out / "datacard.json").read_text())["pipeline_file"] == expected


def test_a_run_without_a_pipeline_file_names_none(tmp_path):
    pipe = _pipeline(tmp_path, "pretrain")
    inputs = [str(p) for p in (tmp_path / "in").iterdir()]
    assert main(["pretrain", *inputs, "--out", str(tmp_path / "out"), "--tokenizer", "default", "--workers", "1",
                 "--no-progress"]) == 0
    assert "pipeline_file" not in json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert "pipeline_file" not in json.loads((tmp_path / "out" / "datacard.json").read_text())
    assert "Pipeline file" not in (tmp_path / "out" / "datacard.md").read_text()  # cards without one: as before
    assert pipe.is_file()
