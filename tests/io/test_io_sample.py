import pickle

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from io_helpers import read_all

from tokenmill.io import expand_inputs, plan_units, read_unit, sample_records


def test_sample_jsonl_counts_readable_records_and_keeps_rejects(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(b'{"i": 0}\nnope\n\n{"i": 1}\n' + b"".join(orjson.dumps({"i": i}) + b"\n" for i in range(2, 500)))
    rows, locs, rejects = sample_records(expand_inputs([str(p)])[0], n=4)
    assert rows == [{"i": 0}, {"i": 1}, {"i": 2}, {"i": 3}] and locs == [1, 4, 5, 6]
    assert [(r.loc, r.reason) for r in rejects] == [(2, "malformed_json")]


def test_sample_json_array_and_parquet(tmp_path):
    a = tmp_path / "a.json"
    a.write_bytes(orjson.dumps([{"k": i} for i in range(1000)]))
    rows, locs, _ = sample_records(expand_inputs([str(a)])[0], n=3)
    assert rows == [{"k": 0}, {"k": 1}, {"k": 2}] and locs == [1, 2, 3]
    p = tmp_path / "p.parquet"
    pq.write_table(pa.table({"k": list(range(1000))}), p, row_group_size=100)
    rows, locs, _ = sample_records(expand_inputs([str(p)])[0], n=250)
    assert rows == [{"k": i} for i in range(250)] and locs == list(range(1, 251))


def test_sample_stops_at_n_rejects_on_garbage(tmp_path):
    p = tmp_path / "junk.jsonl"
    p.write_bytes(b"not json\n" * 10000)
    rows, locs, rejects = sample_records(expand_inputs([str(p)])[0], n=20)
    assert rows == [] and locs == [] and 20 <= len(rejects) < 10000


def test_units_pickle_and_read_the_same_after(tmp_path):
    p = tmp_path / "u.jsonl"
    p.write_bytes(b"".join(orjson.dumps({"i": i}) + b"\n" for i in range(100)))
    units = plan_units(expand_inputs([str(p)]), unit_bytes=64)
    again = pickle.loads(pickle.dumps(units))
    assert again == units and read_all(again)[0] == read_all(units)[0]
    assert units[3].name == "unit-000003"


def test_batches_are_bounded(tmp_path):
    p = tmp_path / "b.jsonl"
    p.write_bytes(b"".join(orjson.dumps({"i": i}) + b"\n" if i % 3 else b"bad\n" for i in range(1000)))
    sizes = [len(b) + len(b.rejects) for b in read_unit(plan_units(expand_inputs([str(p)]))[0], batch_rows=64)]
    assert max(sizes) <= 64 and sum(sizes) == 1000
