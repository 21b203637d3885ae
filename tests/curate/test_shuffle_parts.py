"""A dedup shuffle unit is one file (``parts.bin``): every partition read back is the rows of that partition, in
the written order, from one file per unit."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tokenmill.curate.dedup import common as cm


def test_partitions_read_back_as_written(tmp_path):
    rng = np.random.default_rng(0)
    units = []
    for u in range(3):
        n = [0, 1, 5000][u]  # an empty unit, a unit of one row, a large one
        key = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64)
        doc = rng.integers(0, 10**9, n, dtype=np.int64)
        part = cm.partition_of(key, 7)
        cm.write_partitioned(tmp_path / f"u{u}", part, 7, {"key": key, "doc": doc}, order=(doc, key))
        assert os.listdir(tmp_path / f"u{u}") == [cm.PARTS]  # one file a unit, not one per column
        units.append((part, key, doc))
    for p in range(7):
        got = cm.read_partition([tmp_path / f"u{u}" for u in range(3)], p, ["key", "doc"])
        want_key, want_doc = [], []
        for part, key, doc in units:
            sel = np.flatnonzero(part == p)
            order = sel[np.lexsort((doc[sel], key[sel]))]  # by key, then doc
            want_key.append(key[order])
            want_doc.append(doc[order])
        assert got["key"].dtype == np.uint64 and got["doc"].dtype == np.int64
        assert np.array_equal(got["key"], np.concatenate(want_key)) and np.array_equal(got["doc"], np.concatenate(want_doc))
    whole = cm.read_column(tmp_path / "u2", "doc")
    assert len(whole) == 5000 and sorted(whole.tolist()) == sorted(units[2][2].tolist())
    assert len(cm.read_column(tmp_path / "u0", "doc")) == 0


def test_bad_columns_and_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match="may not be named 'offsets'"):
        cm.write_partitioned(tmp_path / "a", np.zeros(2, np.int64), 1, {"offsets": np.zeros(2)})
    with pytest.raises(ValueError, match="flat array"):
        cm.write_partitioned(tmp_path / "b", np.zeros(2, np.int64), 1, {"x": np.zeros((2, 2))})
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / cm.PARTS).write_bytes(b"\x93NUMPY" + b"\0" * 64)
    with pytest.raises(ValueError, match="not a shuffle file"):
        cm.read_partition([tmp_path / "c"], 0, ["x"])
