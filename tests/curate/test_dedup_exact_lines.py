"""Exact and line dedup as workflow stages after a small documents stage: what they remove, and why."""

from __future__ import annotations

import pickle

import pyarrow.parquet as pq
import pytest
from dedupkit import ledger, run_step, survivors, tree

from tokenmill.base import segments
from tokenmill.curate.dedup.exact import ExactDedup
from tokenmill.curate.dedup.lines import LineDedup
from tokenmill.errors import ConfigError
from tokenmill.steps.registry import step_class


def test_exact_dedup_keeps_the_earliest_of_each_normalised_group(tmp_path):
    units = [["Hello  World", "unique one", "same text"], ["hello world", "SAME\ttext ", "other"], ["Hello World"]]
    step = ExactDedup()
    res = run_step(step, units, tmp_path)
    assert survivors(tmp_path, res, step) == ["unit-000000:0", "unit-000000:1", "unit-000000:2", "unit-000001:2"]
    led = ledger(tmp_path, res, step).to_pydict()
    assert led["reason"].count("exact_dedup_v1:duplicate") == 3
    sizes = dict(zip(led["id"], led["exact_dedup.group_size"]))
    assert sizes["unit-000002:0"] == 3 and sizes["unit-000000:1"] == 1
    assert led["exact_dedup.group"][led["id"].index("unit-000002:0")] == 0  # the survivor: unit 0, row 0
    assert sum(r.stats.kept for r in res["exact_dedup"]) == 4


def test_exact_dedup_without_normalisation_and_with_a_ledger_priority(tmp_path):
    units = [["a b", "A B"], ["a b"]]
    step = ExactDedup(normalize=(), keep="max:quality.score")
    res = run_step(step, units, tmp_path, extra=[{"quality.score": [0.1, 0.5]}, {"quality.score": [0.9]}])
    assert survivors(tmp_path, res, step) == ["unit-000000:1", "unit-000001:0"]


def test_exact_dedup_in_many_partitions_gives_the_bytes_of_one(tmp_path):
    units = [[f"doc {i % 7}" for i in range(u, u + 30)] for u in range(0, 90, 30)]
    res = run_step(ExactDedup(partition_rows=5), units, tmp_path / "a")
    assert len(res["exact_dedup.groups"]) == 18
    ra = run_step(ExactDedup(), units, tmp_path / "c")
    assert len(survivors(tmp_path / "c", ra, ExactDedup())) == 7
    docs = {k: v for k, v in tree(tmp_path / "a").items() if k.startswith("steps/")}
    assert docs == {k: v for k, v in tree(tmp_path / "c").items() if k.startswith("steps/")}


def test_line_dedup_cuts_repeated_lines_and_removes_emptied_documents(tmp_path):
    footer = "Cookie notice: we use cookies to improve your experience."
    units = [[f"First article text.\n{footer}", "Only boilerplate\n" + footer.upper()],
             [f"Second article.\n\n{footer}\nmore words", "Only boilerplate", "untouched\ntext\n"]]
    step = LineDedup()
    res = run_step(step, units, tmp_path)
    led = ledger(tmp_path, res, step).to_pydict()
    texts = {}
    for r in res["line_dedup"]:
        t = pq.read_table(segments.arrow_source(tmp_path / r.data["docs"])).to_pydict()
        texts.update(zip(t["id"], t["text"]))
    assert texts["unit-000000:0"] == f"First article text.\n{footer}"  # the first copy stays
    assert texts["unit-000001:0"] == "Second article.\n\nmore words"
    assert texts["unit-000001:2"] == "untouched\ntext\n"
    assert "unit-000001:1" not in texts  # every line repeated: emptied, removed
    assert led["reason"][led["id"].index("unit-000001:1")] == "line_dedup_v1:empty"
    assert led["line_dedup.segments_removed"][led["id"].index("unit-000000:1")] == 1  # its footer copy
    assert sum(r.stats.extra["line_dedup_segments_removed"] for r in res["line_dedup"]) == 3


def test_line_dedup_threshold_keep_none_and_paragraphs(tmp_path):
    para = "A repeated paragraph\nof two lines."
    units = [[f"intro one\n\n{para}", f"intro two\n\n{para}", f"intro three\n\n{para}"]]
    res = run_step(LineDedup(unit="paragraph", threshold=2, keep="none"), units, tmp_path / "p")
    texts = [t for r in res["line_dedup"]
             for t in pq.read_table(segments.arrow_source(tmp_path / "p" / r.data["docs"])).column("text").to_pylist()]
    assert texts == ["intro one", "intro two", "intro three"]
    res = run_step(LineDedup(unit="paragraph", threshold=3), units, tmp_path / "q")
    assert sum(r.stats.extra["line_dedup_segments_removed"] for r in res["line_dedup"]) == 0


def test_line_dedup_counts_in_many_partitions(tmp_path):
    units = [[f"shared line {'vwxyz'[i % 5]}\nown line {chr(97 + u)}{chr(97 + i)}" for i in range(20)] for u in range(3)]
    res = run_step(LineDedup(partition_rows=4), units, tmp_path / "a")
    assert len(res["line_dedup.groups"]) > 1
    assert sum(r.stats.extra["line_dedup_segments_removed"] for r in res["line_dedup"]) == 60 - 5
    one = run_step(LineDedup(), units, tmp_path / "b")
    assert len(one["line_dedup.groups"]) == 1
    steps = lambda root: {k: v for k, v in tree(root).items() if k.startswith("steps/")}
    assert steps(tmp_path / "a") == steps(tmp_path / "b")


def test_steps_are_registered_picklable_and_refuse_bad_options():
    for name, cls in (("exact_dedup", ExactDedup), ("line_dedup", LineDedup)):
        assert step_class(name) is cls
        assert pickle.loads(pickle.dumps(cls())) == cls()
    with pytest.raises(ConfigError, match="keep"):
        ExactDedup(keep="best")
    with pytest.raises(ConfigError, match="unit"):
        LineDedup(unit="sentence")
    with pytest.raises(ConfigError, match="normalisation"):
        LineDedup(normalize=("stem",))
