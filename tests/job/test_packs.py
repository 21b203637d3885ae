"""A stage's ledger parts packed into a stored zip read back in place, as the loose files were
(``report/ledger.py``, "Packed stage parts")."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.curate.workflows.join import pack_units
from tokenmill.report.ledger import (
    file_schema,
    open_part,
    part_exists,
    read_columns,
    read_stage_parts,
    stage_values,
    write_pack,
)


def _parts(root: Path, n: int) -> list[Path]:
    folder = root / "steps" / "s" / "ledger"
    folder.mkdir(parents=True)
    paths = []
    for i in range(n):
        table = pa.table({"id": [f"{i}-{k}" for k in range(i + 1)], "loc": list(range(1, i + 2)),
                          "s.score": [0.5 * k for k in range(i + 1)]})
        pq.write_table(table, folder / f"unit-{i:06d}.parquet")
        paths.append(folder / f"unit-{i:06d}.parquet")
    return paths


def test_a_packed_part_reads_as_its_loose_file(tmp_path):
    paths = _parts(tmp_path, 4)
    loose = {p: (p.read_bytes(), pq.read_table(p)) for p in paths}
    write_pack(tmp_path / "steps" / "s" / "ledger-000000.zip", [(p.name, p) for p in paths[:2]])
    write_pack(tmp_path / "steps" / "s" / "ledger-000001.zip", [(p.name, p) for p in paths[2:]])
    for p in paths:
        p.unlink()
    for p, (raw, table) in loose.items():
        assert not p.exists() and part_exists(p)
        assert read_columns(p).equals(table) and file_schema(p) == table.schema
        assert pq.read_table(open_part(p)).equals(table)
        with zipfile.ZipFile(p.parent.parent / ("ledger-000000.zip" if p in paths[:2] else "ledger-000001.zip")) as zf:
            assert zf.read(p.name) == raw  # the member is the part byte for byte
    assert not part_exists(tmp_path / "steps" / "s" / "ledger" / "unit-000009.parquet")
    files = [str(p.relative_to(tmp_path)) for p in paths]
    whole = read_stage_parts(tmp_path, files)
    assert whole.num_rows == 1 + 2 + 3 + 4
    assert list(stage_values(tmp_path, files, "s.score")) == [0.5 * k for i in range(4) for k in range(i + 1)]
    with pytest.raises(FileNotFoundError):
        read_columns(tmp_path / "steps" / "s" / "ledger" / "unit-000009.parquet")


def test_a_pack_has_the_same_bytes_on_every_write(tmp_path):
    paths = _parts(tmp_path, 3)
    write_pack(tmp_path / "a.zip", [(p.name, p) for p in paths])
    for p in paths:  # other timestamps and modes: the archive does not record them
        p.chmod(0o600)
    write_pack(tmp_path / "b.zip", [(p.name, p) for p in paths])
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        assert zf.testzip() is None and [i.compress_type for i in zf.infolist()] == [zipfile.ZIP_STORED] * 3


def test_a_rewritten_pack_is_read_afresh(tmp_path):
    paths = _parts(tmp_path, 2)
    pack = tmp_path / "steps" / "s" / "ledger-000000.zip"
    write_pack(pack, [(paths[0].name, paths[0])])
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"id": ["x"] * 7, "loc": list(range(7)), "s.score": [1.0] * 7}), other)
    first = paths[0]
    first.unlink()
    assert read_columns(first).num_rows == 1
    write_pack(pack, [(first.name, other), ("pad.parquet", other)])  # same name, other member (and size)
    assert read_columns(first).num_rows == 7


def test_packs_are_runs_of_consecutive_units_within_both_bounds():
    sizes = [5, 5, 5, 20, 1, 1, 1, 1]
    assert pack_units(sizes, max_bytes=10, max_units=3) == [[0, 1], [2], [3], [4, 5, 6], [7]]
    assert pack_units(sizes, max_bytes=1 << 40, max_units=1024) == [list(range(8))]
    assert pack_units([], max_bytes=10, max_units=3) == []
