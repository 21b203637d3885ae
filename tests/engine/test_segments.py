"""Segment files (``base/segments.py``): the intermediates of a stage's units go to one file per worker
process and directory, the readers find each unit's bytes by its slice, and a unit a kill left half appended
is never read."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tokenmill.base import segments
from tokenmill.curate.dedup import common as cm
from tokenmill.engine import LocalExecutor, UnitResult, journal
from tokenmill.engine.local import commit_unit
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit
from tokenmill.engine.workflow import StageState, run_workflow

WORK = "_work/shuffle"


def _payload(k: int) -> bytes:
    return bytes((k * 7 + i) % 251 for i in range(1000 + 37 * k))  # sizes that are no multiple of 64


@dataclass(frozen=True)
class Shuffle:
    """Per unit: a shuffle file, an ``.npy`` array and an opaque file, all intermediates; one kept output."""

    segments = (WORK,)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        k = unit.index
        cm.write_partitioned(staging / WORK / unit.name, np.arange(k + 3) % 2, 2,
                             {"v": np.arange(k + 3, dtype=np.int64) * 10 + k})
        np.save(staging / WORK / unit.name / "prio.npy", np.full(k + 1, k, dtype=np.float64))
        (staging / WORK / f"{unit.name}.bin").write_bytes(_payload(k))
        (staging / "kept").mkdir()
        (staging / "kept" / f"{unit.name}.txt").write_text(unit.name)
        return UnitResult(outputs=[f"kept/{unit.name}.txt"], data={"dir": f"{WORK}/{unit.name}"})


@dataclass(frozen=True)
class Read:
    """Reads every upstream unit's intermediates back and writes what it read as one output file."""

    dirs: tuple[str, ...]
    out: str

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        out = Path(self.out)
        rows = []
        for k, d in enumerate(self.dirs):
            part = cm.read_partition([out / d], unit.index, ["v"])["v"].tolist()
            column = cm.read_column(out / d, "v").tolist()
            prio = segments.load_npy(out / d / "prio.npy").tolist()
            with segments.open_slice(out / f"{d}.bin") as fh:
                fh.seek(5)
                tail = fh.read()
            rows.append({"part": part, "column": column, "prio": prio, "blob": tail == _payload(k)[5:]})
        (staging / "read").mkdir()
        (staging / "read" / f"{unit.name}.json").write_text(json.dumps(rows, sort_keys=True))
        return UnitResult(outputs=[f"read/{unit.name}.json"])


def _second_filesystem(tmp_path: Path) -> Path:
    """/dev/shm when it is another filesystem than the test's directory (staging there is a copy, not a rename)."""
    scratch = Path("/dev/shm")
    if not scratch.is_dir() or os.stat(scratch).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem (/dev/shm) beside the test's directory")
    return scratch


def _units(n: int) -> list[Unit]:
    return [Unit(i, f"unit-{i:04d}") for i in range(n)]


def _stages(n: int) -> list[Stage]:
    def plan_write(ctx: StageContext) -> StagePlan:
        return StagePlan(_units(n), Shuffle(), {})

    def plan_read(ctx: StageContext) -> StagePlan:
        dirs = tuple(r.data["dir"] for r in ctx.results["write"])
        return StagePlan(_units(2), Read(dirs, str(ctx.out)), {}, drop=(WORK,))

    return [Stage("write", 1, plan_write), Stage("read", 1, plan_read)]


def _outputs(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.relative_to(out).parts[0] in ("kept", "read")}


def test_a_stage_writes_one_segment_per_worker_and_its_readers_find_every_unit(tmp_path):
    with LocalExecutor(workers=2) as executor:
        run_workflow(_stages(12)[:1], out=tmp_path / "run", fingerprint="fp", executor=executor)
    work = tmp_path / "run" / WORK
    held = sorted(p.name for p in work.iterdir())
    segs = [n for n in held if n.startswith(segments.PREFIX)]
    assert 1 <= len(segs) <= 2 and held == sorted([*segs, segments.INDEX])  # no file per unit
    assert len(segments.listing(work)) == 36  # each unit's three files, found by the index
    for k in range(12):
        where = segments.locate(work / f"unit-{k:04d}.bin")
        assert where is not None and where.offset % segments.ALIGN == 0
        with open(where.path, "rb") as fh:
            fh.seek(where.offset)
            assert fh.read(where.length) == _payload(k)
        by_part = sorted(range(k + 3), key=lambda v: v % 2)  # the shuffle's rows, partition by partition
        assert cm.read_column(work / f"unit-{k:04d}", "v").tolist() == [v * 10 + k for v in by_part]
    with segments.Readers() as files:  # the twelve units' files read through the segments, each opened once
        assert [files.open(work / f"unit-{k:04d}.bin").read() for k in range(12)] == [_payload(k) for k in range(12)]
        assert len(files) == len(segs)
    assert segments.locate(work / "unit-0099.bin") is None
    with pytest.raises(FileNotFoundError):
        segments.open_slice(work / "unit-0099.bin")


def test_the_bytes_are_those_of_one_worker_and_the_segments_go_with_their_directory(tmp_path):
    runs = {}
    for workers in (1, 3):
        out = tmp_path / f"w{workers}"
        with LocalExecutor(workers=workers) as executor:
            run_workflow(_stages(9), out=out, fingerprint="fp", executor=executor)
        runs[workers] = _outputs(out)
        assert not (out / "_work").exists()  # dropped by its reader, segments and index with it
    assert runs[1] == runs[3] and len(runs[1]) == 11
    rows = json.loads(runs[1]["read/unit-0001.json"])
    assert all(r["blob"] for r in rows) and rows[4]["prio"] == [4.0] * 5


def test_bytes_a_killed_unit_left_in_a_segment_are_never_read(tmp_path):
    out = tmp_path / "run"
    state = StageState(out, "write_v1")
    state.prepare("fp")
    for unit in _units(3):
        commit_unit(Shuffle(), unit, state)
    (seg,) = [p for p in (out / WORK).iterdir() if p.name.startswith(segments.PREFIX)]
    with open(seg, "ab") as fh:
        fh.write(b"\xff" * 333)  # a unit a kill -9 cut short: appended, never journalled
    segments.close()
    journal.close()
    again = StageState(out, "write_v1")  # the next run: its own segment, from a new process's name
    for unit in _units(5)[3:]:
        commit_unit(Shuffle(), unit, again)
    segments.close()
    journal.close()
    again.end(_units(5), again.committed(_units(5)))
    names = [p.name for p in (out / WORK).iterdir() if p.name.startswith(segments.PREFIX)]
    assert len(names) == 2  # each process its own segment
    for k in range(5):
        with segments.open_slice(out / WORK / f"unit-{k:04d}.bin") as fh:
            assert fh.read() == _payload(k)


def test_staging_on_another_filesystem_gives_the_same_bytes(tmp_path, monkeypatch):
    scratch = _second_filesystem(tmp_path)
    with LocalExecutor(workers=1) as executor:
        run_workflow(_stages(4), out=tmp_path / "here", fingerprint="fp", executor=executor)
    place = scratch / f"tokenmill-test-{os.getpid()}"
    monkeypatch.setenv(segments.SCRATCH_ENV, str(place))
    try:
        with LocalExecutor(workers=2) as executor:
            run_workflow(_stages(4), out=tmp_path / "there", fingerprint="fp", executor=executor)
        assert _outputs(tmp_path / "there") == _outputs(tmp_path / "here")
        assert not list(place.iterdir())  # each stage's staging removed when it ended
        assert not (tmp_path / "there" / "_state" / "write_v1" / "tmp").exists()
    finally:
        import shutil

        shutil.rmtree(place, ignore_errors=True)


def test_a_forked_process_appends_to_a_segment_of_its_own(tmp_path):
    out = tmp_path / "run"
    state = StageState(out, "write_v1")
    state.prepare("fp")
    commit_unit(Shuffle(), _units(1)[0], state)  # this process now holds a segment of the stage
    pid = os.fork()
    if pid == 0:  # the child commits the next unit of the same stage
        try:
            commit_unit(Shuffle(), _units(2)[1], state)
            segments.close()
            journal.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    segments.close()
    journal.close()
    state.end(_units(2), state.committed(_units(2)))
    names = [p.name for p in (out / WORK).iterdir() if p.name.startswith(segments.PREFIX)]
    assert len(names) == 2  # the child's unit went to a new segment, not to the end of the parent's
    for k in range(2):
        with segments.open_slice(out / WORK / f"unit-{k:04d}.bin") as fh:
            assert fh.read() == _payload(k)


def test_a_task_checked_against_the_input_snapshot_keeps_its_segments():
    from tokenmill.io.snapshot import CheckedTask

    assert CheckedTask(Shuffle(), {}).segments == (WORK,)  # the curate run's first stage is such a task


def test_a_scratch_directory_that_cannot_be_made_is_a_clear_error(tmp_path, monkeypatch):
    from tokenmill.errors import ConfigError

    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv(segments.SCRATCH_ENV, str(tmp_path / "file" / "scratch"))
    with pytest.raises(ConfigError, match="TOKENMILL_SCRATCH"):
        StageState(tmp_path / "run", "write_v1").prepare("fp")


def test_a_copy_from_another_filesystem_cut_short_by_a_kill_leaves_nothing_among_the_outputs(tmp_path, monkeypatch):
    import shutil

    scratch = _second_filesystem(tmp_path)
    place = scratch / f"tokenmill-test-kill-{os.getpid()}"
    monkeypatch.setenv(segments.SCRATCH_ENV, str(place))
    out = tmp_path / "run"
    try:
        state = StageState(out, "write_v1")
        state.prepare("fp")
        pid = os.fork()
        if pid == 0:  # the unit's output is copied into the output's filesystem, then the process dies
            copy = shutil.copyfile

            def copy_then_die(src, dst, **kw):
                copy(src, dst, **kw)
                os._exit(9)

            shutil.copyfile = copy_then_die
            try:
                commit_unit(Shuffle(), _units(1)[0], state)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        kept = [p for p in (out / "kept").rglob("*")] if (out / "kept").exists() else []
        assert kept == []  # the copy is not among the outputs, under any name
        again = StageState(out, "write_v1")
        again.prepare("fp")  # the next run clears what the kill left
        left = [p for p in out.rglob("*") if p.is_file() and "_state" not in p.parts]
        # only the killed process's segment, whose bytes no journal line names (dropped with its directory)
        assert [p.parent for p in left] == [out / WORK] and left[0].name.startswith(segments.PREFIX)
        assert again.committed(_units(1)) == {}
    finally:
        shutil.rmtree(place, ignore_errors=True)
