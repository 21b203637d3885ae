"""Small input files share work units (issue 42, scale: 10,000 tiny files): packed units keep every record's
file and line (ledger, rejects, documents), ``--limit`` per file, the snapshot check of every file, the
router's per-file refusal, resume after kill -9 and the same bytes at 1 and 2 workers."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import trackkit as tk

import statekit
from tokenmill.base.inputs import FILES_PER_UNIT, InputFile, estimate_units
from tokenmill.cli import main
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.errors import InputError, RoutingError
from tokenmill.io import plan_units
from tokenmill.io.paths import expand_inputs
from tokenmill.io.snapshot import check_unit_input, take_snapshot
from tokenmill.pretrain import run_pretrain
from tokenmill.report.ledger import read_ledger

BROKEN_EVERY = 7  # every 7th file has a malformed second line


def write_tiny(root: Path, n: int, *, lines: int = 3, words: int = 6) -> dict[tuple[str, int], str]:
    """``n`` small JSONL files ``f00000.jsonl``...; each record's text names its file and line. Returns the
    text of every readable record by (file, line); the second line of every 7th file is malformed JSON."""
    root.mkdir(parents=True, exist_ok=True)
    texts = {}
    for i in range(n):
        name, rows = f"f{i:05d}.jsonl", []
        for line in range(1, lines + 1):
            if line == 2 and i % BROKEN_EVERY == 0:
                rows.append('{"text": "unterminated\n')
                continue
            text = f"file {name} line {line} " + " ".join(f"w{(i * 7 + line * 3 + k) % 97}" for k in range(words))
            texts[(name, line)] = text
            rows.append(json.dumps({"text": text}) + "\n")
        (root / name).write_text("".join(rows))
    return texts


def rejects_at(out: Path) -> set[tuple[str, int, str]]:
    return {(r["source"], r["loc"], r["reason"]) for r in tk.read_rejects(out)}


def broken(n: int, *, lines: int = 3) -> set[tuple[str, int, str]]:
    return {(f"f{i:05d}.jsonl", 2, "malformed_json") for i in range(0, n, BROKEN_EVERY) if lines >= 2}


# the plan ------------------------------------------------------------------------------------------------------

def _file(name: str, size: int, fmt: str = "text") -> InputFile:
    return InputFile(path=f"/nowhere/{name}", rel=name, format=fmt, size=size)


def test_consecutive_small_files_share_units_up_to_the_size_and_the_file_cap():
    small = [_file(f"s{i:05d}.txt", 100) for i in range(FILES_PER_UNIT + 10)]
    big = _file("big.txt", 1 << 20)
    units = plan_units([*small[:5], big, *small[5:]], unit_bytes=4 << 20)
    assert [len(u.files) for u in units] == [5, 1, FILES_PER_UNIT, 5]
    assert [f.rel for u in units for f in u.files] == [f.rel for f in [*small[:5], big, *small[5:]]]
    assert [u.index for u in units] == [0, 1, 2, 3]
    by_bytes = plan_units(small[:400], unit_bytes=30_000)  # small: under 117 bytes; 300 files of 100 bytes a unit
    assert [len(u.files) for u in by_bytes] == [300, 100] and [u.size for u in by_bytes] == [30_000, 10_000]
    assert estimate_units([*small[:5], big, *small[5:]], unit_bytes=4 << 20) == 3  # 1,034 small: 2 units by count


def test_files_of_ordinary_size_keep_their_own_units(tmp_path):
    for i in range(3):
        (tmp_path / f"d{i}.txt").write_text("x" * 20_000)  # over 16 KiB: 1/256 of the 4 MiB unit
    units = plan_units(expand_inputs([str(tmp_path)]), unit_bytes=4 << 20)
    assert [len(u.files) for u in units] == [1, 1, 1]


# what the tracks write ------------------------------------------------------------------------------------------

def test_the_ledger_documents_and_rejects_name_each_records_own_file_and_line(tmp_path):
    texts = write_tiny(tmp_path / "in", 120)
    out = tmp_path / "out"
    manifest = run_curate([str(tmp_path / "in")], out=out, preset="none", workers=1, progress=False)
    assert manifest["run"]["units"] == 1  # 120 files, one unit
    ledger = read_ledger(out).to_pylist()
    assert {(r["source"], r["loc"]) for r in ledger} == set(texts) | {(s, loc) for s, loc, _ in broken(120)}
    assert len(ledger) == len(texts) + len(broken(120))
    docs = pq.read_table(out / "documents").to_pylist()
    assert len(docs) == len(texts)
    for doc in docs:  # each document's text names the file and line the ledger gives it
        assert texts[(doc["source"], int(doc["id"].rsplit(":", 1)[1]))] == doc["text"]
    assert rejects_at(out) == broken(120)


def test_pretrain_counts_every_packed_file_on_its_own(tmp_path):
    texts = write_tiny(tmp_path / "in", 60)
    manifest = run_pretrain([str(tmp_path / "in")], out=str(tmp_path / "out"), workers=1, progress=False)
    assert manifest["run"]["units"] == 1
    sources = manifest["sources"]
    assert list(sources) == [f"f{i:05d}.jsonl" for i in range(60)]
    for i in range(60):
        row = sources[f"f{i:05d}.jsonl"]
        assert row["records"] == 3 and row["kept"] == (2 if i % BROKEN_EVERY == 0 else 3) and row["tokens"] > 0
    assert sum(r["kept"] for r in sources.values()) == manifest["counts"]["kept"] == len(texts)
    assert rejects_at(tmp_path / "out") == broken(60)


def test_limit_takes_the_first_records_of_every_packed_file(tmp_path):
    write_tiny(tmp_path / "in", 30, lines=4)
    manifest = run_pretrain([str(tmp_path / "in")], out=str(tmp_path / "out"), workers=1, progress=False, limit=2)
    assert manifest["run"]["units"] == 1
    assert {r["records"] for r in manifest["sources"].values()} == {2}
    assert rejects_at(tmp_path / "out") == broken(30)  # line 2 is within the limit of each file


def test_a_misrouted_small_file_is_named_and_skip_misrouted_leaves_it_out(tmp_path):
    write_tiny(tmp_path / "in", 20)
    chats = tmp_path / "in" / "f00010b.jsonl"
    tk.write_chats(chats, 5, seed=1)
    with pytest.raises(RoutingError, match="f00010b.jsonl"):
        run_pretrain([str(tmp_path / "in")], out=str(tmp_path / "a"), workers=1, progress=False)
    manifest = run_pretrain([str(tmp_path / "in")], out=str(tmp_path / "b"), workers=1, progress=False,
                            skip_misrouted=True)
    assert "f00010b.jsonl" not in manifest["sources"] and len(manifest["sources"]) == 20
    assert manifest["run"]["units"] == 1


def test_the_same_bytes_at_one_and_two_workers(tmp_path):
    write_tiny(tmp_path / "in", 700, lines=2, words=3)  # ~96-byte files, 64 KB units: two packed units
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        args = ["pretrain", str(tmp_path / "in"), "--out", str(out), "--workers", str(workers), "--unit-bytes",
                "64KB", "--shard-tokens", "2000", "--val-fraction", "0.1", "--no-progress"]
        assert tk.cli(*args).returncode == 0
        outs.append(out)
    manifest = json.loads((outs[0] / "manifest.json").read_text())
    assert manifest["run"]["units"] >= 2
    assert manifest["split"]["val"]["documents"] > 0
    tk.assert_same_output(*outs)


# resume and changed inputs --------------------------------------------------------------------------------------

def _args(inputs: Path, out: Path) -> list[str]:
    return ["pretrain", str(inputs), "--out", str(out), "--workers", "1", "--unit-bytes", "64KB",
            "--shard-tokens", "2000", "--no-progress"]


def test_resume_after_losing_packed_units_gives_the_same_bytes(tmp_path):
    write_tiny(tmp_path / "in", 700, lines=2, words=3)
    reference, out = tmp_path / "reference", tmp_path / "out"
    assert tk.cli(*_args(tmp_path / "in", reference)).returncode == 0
    assert tk.cli(*_args(tmp_path / "in", out)).returncode == 0
    done = statekit.reopen(out, "shards_v1")
    markers = sorted(done.glob("*.json"))
    assert len(markers) >= 2
    for marker in markers[1:]:
        marker.unlink()  # what a kill -9 after the first unit leaves
    (out / "manifest.json").unlink()
    again = tk.cli(*_args(tmp_path / "in", out))
    assert again.returncode == 0, again.stderr
    tk.assert_same_output(reference, out)


def test_kill_9_in_a_run_of_packed_units_then_resume_gives_the_same_bytes(tmp_path):
    write_tiny(tmp_path / "in", 4000, lines=2, words=3)
    reference, out = tmp_path / "reference", tmp_path / "out"
    assert tk.cli(*_args(tmp_path / "in", reference), timeout=300).returncode == 0
    total = len(statekit.committed(reference, "shards_v1"))
    assert total >= 6
    proc = tk.popen(*_args(tmp_path / "in", out))
    done_dir = statekit.state_dir(out, "shards_v1") / "done"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if statekit.count(done_dir) >= 1:
                break
            time.sleep(0.005)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.stdout.close()
        proc.stderr.close()
    assert not (out / "manifest.json").exists()
    assert 1 <= statekit.count(done_dir) < total
    again = tk.cli(*_args(tmp_path / "in", out), timeout=300)
    assert again.returncode == 0, again.stderr
    tk.assert_same_output(reference, out)


def test_a_packed_file_changed_before_the_resume_is_named(tmp_path):
    write_tiny(tmp_path / "in", 700, lines=2, words=3)
    out = tmp_path / "out"
    assert tk.cli(*_args(tmp_path / "in", out)).returncode == 0
    done = statekit.reopen(out, "shards_v1")
    for marker in sorted(done.glob("*.json"))[1:]:
        marker.unlink()
    (out / "manifest.json").unlink()
    changed = tmp_path / "in" / "f00345.jsonl"  # inside a packed unit, not its first file
    body = changed.read_bytes()
    changed.write_bytes(body.replace(b"line 1", b"LINE 1"))
    again = tk.cli(*_args(tmp_path / "in", out))
    assert again.returncode != 0 and "f00345.jsonl changed since this run started" in again.stderr
    assert "Traceback" not in again.stderr


def test_a_packed_file_changed_while_its_unit_ran_fails_the_unit(tmp_path):
    write_tiny(tmp_path / "in", 40)
    files = expand_inputs([str(tmp_path / "in")])
    (unit,) = plan_units(files)
    snapshot = take_snapshot(files)
    check_unit_input(unit, snapshot)  # nothing changed
    last = tmp_path / "in" / "f00039.jsonl"
    last.write_text(last.read_text() + json.dumps({"text": "one more"}) + "\n")
    with pytest.raises(InputError, match=r"f00039.jsonl changed while unit-000000 read it"):
        check_unit_input(unit, snapshot)


def test_the_summary_names_the_first_inputs_and_counts_the_rest(tmp_path, capsys):
    write_tiny(tmp_path / "in", 30)
    assert main(["pretrain", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--workers", "1",
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "  f00019.jsonl: " in printed and "f00020.jsonl" not in printed
    assert "  ... and 10 more inputs (their counts: manifest.json, sources)" in printed


def test_a_multi_stage_curate_ledger_is_the_same_packed_or_not(tmp_path):
    """Dedup between two document steps: three stages whose ledger parts are joined by file and line (lines
    repeat from file to file in a packed unit); the ledger's rows equal those of a run with a unit per file."""
    texts = write_tiny(tmp_path / "in", 40)
    dup = tmp_path / "in" / "f00040.jsonl"  # repeats the first file's texts: dedup removes one of each pair
    dup.write_text("".join(json.dumps({"text": texts[("f00000.jsonl", n)]}) + "\n" for n in (1, 3)))
    steps = [{"name": "length", "min_chars": 40}, {"name": "exact_dedup"}, {"name": "length", "min_chars": 41}]
    rows = {}
    for name, unit_bytes in (("packed", None), ("apart", 2_000)):  # 2,000 bytes: no file is small enough to share
        out = tmp_path / name
        manifest = run_curate([str(tmp_path / "in")], out=out, steps=steps, workers=1, progress=False,
                              unit_bytes=unit_bytes)
        assert manifest["run"]["units"] == (1 if name == "packed" else 41)
        table = read_ledger(out)
        rows[name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())
        assert [(r["source"], r["loc"]) for r in table.to_pylist()] == sorted(
            (r["source"], r["loc"]) for r in table.to_pylist())  # in input order: by file, then line
    assert rows["packed"] == rows["apart"]
    assert sum('"duplicate' in r or "exact_dedup" in r and '"kept": false' in r for r in rows["packed"]) >= 2
