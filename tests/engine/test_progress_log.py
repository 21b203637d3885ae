"""Progress in logs: when stderr is not a terminal, a plain line every N seconds of finished units."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "track"))
import trackkit as tk

from tokenmill.cli import main


def run(tmp_path, name, *extra):
    src = tmp_path / "docs.jsonl"
    if not src.exists():
        tk.write_docs(src, 200)
    return main(["pretrain", str(src), "--out", str(tmp_path / name), "--workers", "1", "--unit-bytes", "4KB",
                 "--tokenizer", "default", *extra])


def test_a_log_gets_progress_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOKENMILL_PROGRESS_EVERY", "0")
    assert run(tmp_path, "a") == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress ")]
    assert len(lines) >= 5 and "\r" not in "".join(lines)
    assert "units]" in lines[-1] and "docs" in lines[-1] and "/s" in lines[-1] and "ETA" in lines[-1]
    units = json.loads((tmp_path / "a" / "manifest.json").read_text())["run"]["units"]
    assert f"[{units}/{units} units]" in lines[-1] and units >= 5


def test_the_interval_spaces_the_lines_and_no_progress_silences_them(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOKENMILL_PROGRESS_EVERY", "3600")
    assert run(tmp_path, "b") == 0
    assert "progress " not in capsys.readouterr().err  # a run shorter than one interval stays quiet
    monkeypatch.setenv("TOKENMILL_PROGRESS_EVERY", "0")
    assert run(tmp_path, "c", "--no-progress") == 0
    assert "progress " not in capsys.readouterr().err
