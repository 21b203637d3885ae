import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from io_helpers import read_all

from tokenmill.io import detect_format, expand_inputs, plan_units, read_unit

N = 1000


def _table(n=N):
    return pa.table(
        {"id": [f"r{i}" for i in range(n)], "text": [f"doc {i} " * (i % 5 + 1) for i in range(n)], "n": list(range(n))}
    )


def test_parquet_row_group_split_equals_whole(tmp_path):
    p = tmp_path / "t.parquet"
    pq.write_table(_table(), p, row_group_size=64)  # 16 row groups
    files = expand_inputs([str(p)])
    assert files[0].format == "parquet"
    whole = read_all(plan_units(files, unit_bytes=1 << 40), batch_rows=100)
    units = plan_units(files, unit_bytes=1)
    assert len(units) == 16
    assert [u.start for u in units] == list(range(16)) and [u.stop for u in units] == list(range(1, 17))
    assert [u.first_loc for u in units] == [1 + 64 * i for i in range(16)]
    split = read_all(units, batch_rows=50)
    assert split[0] == whole[0] == _table().to_pylist()
    assert split[1] == whole[1] == list(range(1, N + 1))
    mid = plan_units(files, unit_bytes=files[0].size // 3)
    assert 1 < len(mid) < 16 and read_all(mid)[0] == whole[0]


def test_parquet_projection_and_batches(tmp_path):
    p = tmp_path / "t.parquet"
    pq.write_table(_table(), p, row_group_size=300)
    unit = plan_units(expand_inputs([str(p)]))[0]
    batches = list(read_unit(unit, batch_rows=128, columns=["text", "missing"]))
    assert all(b.table.schema.names == ["text"] and len(b) <= 128 for b in batches)
    assert sum(len(b) for b in batches) == N
    assert batches[0].rows is None and batches[0].locs[:3] == [1, 2, 3]


@pytest.mark.parametrize("kind", ["file", "stream"])
def test_arrow_ipc_file_and_stream(tmp_path, kind):
    table = _table()
    p = tmp_path / ("t.arrow" if kind == "file" else "t.ipc")
    batches = table.to_batches(max_chunksize=100)
    with pa.OSFile(str(p), "wb") as sink:
        new = pa.ipc.new_file if kind == "file" else pa.ipc.new_stream
        with new(sink, table.schema) as writer:
            for b in batches:
                writer.write_batch(b)
    files = expand_inputs([str(p)])
    assert files[0].format == "arrow"
    units = plan_units(files, unit_bytes=1)
    assert len(units) == (10 if kind == "file" else 1)
    assert [u.first_loc for u in units] == ([1 + 100 * i for i in range(10)] if kind == "file" else [1])
    rows, locs, rejects, _, _ = read_all(units, batch_rows=33)
    assert rows == table.to_pylist() and locs == list(range(1, N + 1)) and not rejects


def test_feather_is_arrow(tmp_path):
    from pyarrow import feather

    p = tmp_path / "t.feather"
    feather.write_feather(_table(10), str(p))
    assert detect_format(str(p)) == ("arrow", "")
    assert read_all(plan_units(expand_inputs([str(p)])))[0] == _table(10).to_pylist()


def test_hf_dataset_directory(tmp_path):
    datasets = pytest.importorskip("datasets")
    data = {"text": [f"t{i}" for i in range(50)], "label": list(range(50))}
    ds = datasets.Dataset.from_dict(data)
    root = tmp_path / "in"
    ds.save_to_disk(str(root / "ds"), max_shard_size=400)  # several *.arrow shards
    assert len(list((root / "ds").glob("*.arrow"))) > 1
    (root / "other.jsonl").write_text('{"text": "x"}\n')
    files = expand_inputs([str(root)])
    assert [(f.rel, f.format) for f in files] == [("ds", "hf_dataset"), ("other.jsonl", "jsonl")]
    rows, locs, rejects, _, _ = read_all(plan_units(files[:1]), batch_rows=7)
    assert rows == [{"text": t, "label": n} for t, n in zip(data["text"], data["label"])]
    assert locs == list(range(1, 51)) and not rejects
    direct = expand_inputs([str(root / "ds")])
    assert [(f.rel, f.format, f.size) for f in direct] == [("ds", "hf_dataset", 0)]


def test_parquet_with_wrong_bytes_is_an_input_error(tmp_path):
    from tokenmill.errors import InputError

    p = tmp_path / "fake.parquet"
    p.write_text("not parquet at all")
    with pytest.raises(InputError, match="does not start like one"):
        expand_inputs([str(p)])
