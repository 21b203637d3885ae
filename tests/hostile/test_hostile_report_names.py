"""A file name that is not UTF-8 reaches the curation report: the report is written, the name shown with
its undecodable bytes as ``\\xNN`` (as in the manifest and the rejects), and the run exits 0."""

from __future__ import annotations

import json
import os

import hostilekit as hk

from tokenmill.cli import main


def test_a_non_utf8_file_name_is_shown_in_the_curation_report(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    odd = os.path.join(os.fsencode(src), b"caf\xe9.jsonl")
    with open(odd, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"id": f"d{i}", "text": f"plain words number {i} " * 20}) + "\n" for i in range(8))
    hk.docs(src / "plain.jsonl", 4)
    config = tmp_path / "pipe.yaml"
    config.write_text("steps: [{name: length, min_chars: 10}]\n", encoding="utf-8")
    assert main(["curate", str(src), "--out", str(tmp_path / "out"), "--config", str(config), "--workers", "1",
                 "--no-progress"]) == 0
    report = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "caf\\xe9.jsonl" in report
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == 12
