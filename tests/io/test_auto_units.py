"""The automatic unit size: a file larger than 4 MiB is split so several workers have work, the units follow
from the input alone, and the output bytes do not depend on the number of workers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tokenmill.cli import main
from tokenmill.io import expand_inputs, plan_units
from tokenmill.io.units import MIN_UNIT_BYTES, auto_unit_bytes


def _write_docs(path: Path, mb: float) -> Path:
    words = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()
    with open(path, "w") as fh:
        i, total = 0, 0
        while total < mb * 2**20:
            text = " ".join(words[(i + k) % len(words)] for k in range(40 + i % 300)) + f". Document {i}."
            line = json.dumps({"id": str(i), "text": text}) + "\n"
            fh.write(line)
            total += len(line)
            i += 1
    return path


def test_small_input_stays_one_unit_per_file(tmp_path):
    files = expand_inputs([str(_write_docs(tmp_path / "a.jsonl", 0.5))])
    assert auto_unit_bytes(files) == MIN_UNIT_BYTES
    assert len(plan_units(files)) == 1


def test_large_file_is_split_by_its_size(tmp_path):
    path = _write_docs(tmp_path / "big.jsonl", 9)
    files = expand_inputs([str(path)])
    units = plan_units(files)
    assert len(units) == -(-path.stat().st_size // MIN_UNIT_BYTES)  # 9 MiB in 4 MiB units: 3
    assert units[0].start == 0 and units[-1].stop == path.stat().st_size
    assert all(a.stop == b.start for a, b in zip(units, units[1:]))  # the ranges tile the file
    assert plan_units(files, unit_bytes=64 << 20) != units and len(plan_units(files, unit_bytes=64 << 20)) == 1


def test_huge_total_caps_at_64_mib():
    from tokenmill.base.inputs import InputFile

    files = [InputFile(path=f"/x/{i}.jsonl", rel=f"{i}.jsonl", format="jsonl", size=1 << 30) for i in range(4)]
    assert auto_unit_bytes(files) == 64 << 20


def _digests(out: Path) -> dict[str, str]:
    skip = {"manifest.json", "report.html"}
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*"))
            if p.is_file() and "_state" not in p.parts and p.name not in skip}


def test_curate_bytes_do_not_depend_on_workers(tmp_path):
    path = _write_docs(tmp_path / "big.jsonl", 9)
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        args = ["curate", str(path), "--out", str(out), "--workers", str(workers), "--no-progress",
                "--config", str(_pipeline(tmp_path))]
        assert main(args) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["run"]["units"] == 3
        assert manifest["config"]["unit_bytes"] == MIN_UNIT_BYTES
        outs.append(_digests(out))
    assert outs[0] == outs[1] and outs[0]


def _pipeline(tmp_path: Path) -> Path:
    p = tmp_path / "pipeline.yaml"
    p.write_text("steps:\n  - name: length\n    min_chars: 300\n  - name: exact_dedup\n")
    return p
