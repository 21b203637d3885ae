"""Real-data tier: what line and exact dedup find in ../shared/data/pretrain."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dedupkit import ledger, run_step

from tokenmill.base import segments
from tokenmill.curate.dedup.exact import ExactDedup
from tokenmill.curate.dedup.lines import LineDedup

pytestmark = pytest.mark.realdata


def _jsonl(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text().split("\n") if line.strip()]


def _texts(out, res, step) -> dict[str, str]:
    got = {}
    for r in res[step.name]:
        t = pq.read_table(segments.arrow_source(Path(out) / r.data["docs"])).to_pydict()
        got.update(zip(t["id"], t["text"]))
    return got


def test_line_dedup_finds_the_boilerplate_of_real_pages_and_books(shared_data, tmp_path):
    pre = shared_data / "pretrain"
    books = [(pre / n).read_text() for n in ("gutenberg_1342_pride_and_prejudice.txt",
                                             "gutenberg_pg1342_with_license_footer.txt")]
    units = [_jsonl(pre / "dclm_quality_agreement_data.jsonl"), _jsonl(pre / "datajuicer_demo-dataset-deduplication.jsonl"),
             books]
    step = LineDedup()
    res = run_step(step, units, tmp_path)
    kept = _texts(tmp_path, res, step)
    web = [kept.get(f"unit-000000:{i}", "") for i in range(len(units[0]))]
    blogger = ("Post a Comment", "Subscribe to: Post Comments (Atom)")
    # the blog platform's footer stays in the first page that has it and nowhere else
    for line in blogger:
        holders = [i for i, t in enumerate(units[0]) if line in t.split("\n")]
        assert len(holders) >= 2
        assert [i for i, t in enumerate(web) if line in t.split("\n")] == holders[:1]
    # the data-juicer demo's repeated text: kept once
    repeated = "This paper proposed a novel method on LLM pretraining."
    assert sum(t.count(repeated) for t in units[1]) >= 2
    assert sum(kept.get(f"unit-000001:{i}", "").count(repeated) for i in range(len(units[1]))) == 1
    # the second edition of the book loses the lines the first already has; its Gutenberg licence,
    # present in that file only, stays
    led = ledger(tmp_path, res, step).to_pydict()
    second = led["id"].index("unit-000002:1")
    assert led["line_dedup.segments_removed"][second] > 10_000
    assert "Project Gutenberg" in kept["unit-000002:1"] and kept["unit-000002:0"] == books[0]


def test_exact_dedup_finds_the_repeated_demo_texts(shared_data, tmp_path):
    texts = _jsonl(shared_data / "pretrain" / "datajuicer_demo-dataset-deduplication.jsonl")
    step = ExactDedup()
    res = run_step(step, [texts], tmp_path)
    normal = [" ".join(t.lower().split()) for t in texts]
    assert len(_texts(tmp_path, res, step)) == len(set(normal)) < len(texts)
