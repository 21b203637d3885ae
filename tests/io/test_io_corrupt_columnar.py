"""Parquet and Arrow files that cannot even be opened are planned as one unit and read as one reject."""

from __future__ import annotations

import pytest

from tokenmill.io import expand_inputs, plan_units, read_unit


@pytest.mark.parametrize("name, data", [("broken.parquet", b"PAR1 not really parquet"),
                                        ("broken.arrow", b"ARROW1 too short")])
def test_unopenable_columnar_file_becomes_one_unreadable_reject(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    units = plan_units(expand_inputs([str(tmp_path / name)]))
    assert len(units) == 1
    batches = [b for u in units for b in read_unit(u)]
    rejects = [r for b in batches for r in b.rejects]
    assert sum(len(b) for b in batches) == 0
    assert [(r.source, r.loc, r.reason) for r in rejects] == [(name, 1, "unreadable")]
    assert "corrupt" in rejects[0].detail
