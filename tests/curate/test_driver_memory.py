"""What the curate driver reads after the stages (the data card, the funnel's details, the report's histograms)
stays bounded by one ledger file, whatever the number of files: the same numbers as reading the whole ledger
at once, with one file's rows (or one column of one part) in memory at a time."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memkit import traced_peak
from tokenmill.curate.report import details, html
from tokenmill.report.datacard import card_data

ROWS = 400
LICENCES = ["cc-by-4.0", None, "mit", "cc0"]
LANGS = ["en", "en", "fr", None]
REASONS = [None, None, "language_v1:wrong_language", "decontaminate_v2:gsm8k_test", None, "exact_dedup_v1:duplicate"]


def _ledger(out: Path, files: int) -> dict:
    """A run's decision ledger of ``files`` unit files (two sources), and its manifest."""
    (out / "ledger").mkdir(parents=True)
    names = []
    for u in range(files):
        n = np.arange(ROWS)
        table = pa.table({
            "record": [f"s{u % 2}.jsonl:{u * ROWS + i}" for i in n], "source": [f"s{u % 2}.jsonl"] * ROWS,
            "loc": pa.array(u * ROWS + n + 1, pa.int64()), "kept": [REASONS[(u + i) % 6] is None for i in n],
            "reason": pa.array([REASONS[(u + i) % 6] for i in n], pa.string()),
            "license.label": pa.array([LICENCES[(u * 7 + i) % 4] for i in n], pa.string()),
            "language.label": pa.array([LANGS[(u + i * 3) % 4] for i in n], pa.string()),
            "decontaminate.benchmark": pa.array(["gsm8k_test" if REASONS[(u + i) % 6] and "decont" in
                                                 REASONS[(u + i) % 6] else None for i in n], pa.string())})
        names.append(f"ledger/u{u:04d}.parquet")
        pq.write_table(table, out / names[-1])
    return {"track": "curate", "decision_ledger": {"files": names}, "counts": {"kept": 0, "input": files * ROWS}}


def _oracle(out: Path, manifest: dict) -> dict:
    """The card's ledger numbers from the whole ledger read as one table."""
    rows = pa.concat_tables([pq.read_table(out / f) for f in manifest["decision_ledger"]["files"]]).to_pylist()
    kept = [r for r in rows if not r["reason"]]
    by_source: dict[str, Counter] = {}
    for r in rows:
        c = by_source.setdefault(r["source"], Counter())
        c["records"] += 1
        c["kept"] += not r["reason"]
    return {"licences": Counter(r["license.label"] or "unknown" for r in kept),
            "languages": Counter(r["language.label"] for r in kept if r["language.label"]),
            "decontamination": Counter(r["decontaminate.benchmark"] for r in rows
                                       if (r["reason"] or "").startswith("decontaminate_v")),
            "sources": {k: (v["records"], v["kept"]) for k, v in by_source.items()}}


def test_card_counts_equal_the_whole_ledgers_and_memory_does_not_grow_with_its_files(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    m_small, m_large = _ledger(small, 2), _ledger(large, 24)
    for out, m in ((small, m_small), (large, m_large)):
        data, want = card_data(out, m), _oracle(out, m)
        assert data["licences"] == dict(want["licences"].most_common())
        assert data["languages"] == dict(want["languages"].most_common())
        assert data["decontamination"] == dict(sorted(want["decontamination"].items()))
        assert {s["source"]: (s["records"], s["kept"]) for s in data["sources"]} == want["sources"]
    card_data(small, m_small)  # imports and caches warm
    # 12x the rows: the old card held every row as a dict (12x the memory); now one file's rows at a time
    assert traced_peak(card_data, large, m_large) < 1.5 * traced_peak(card_data, small, m_small)


def _parts(out: Path, files: int) -> dict:
    """Stage ledger parts of exact_dedup (cluster sizes) and of a quality top fraction (scores)."""
    rng = np.random.default_rng(0)
    dedup, quality = [], []
    for u in range(files):
        base = {"id": [f"d{u}-{i}" for i in range(ROWS)], "source": ["s.jsonl"] * ROWS,
                "loc": pa.array(np.arange(ROWS) + u * ROWS, pa.int64())}
        sizes = rng.choice([1, 1, 1, 2, 3, 4], ROWS)
        dedup.append(f"steps/exact_dedup/ledger/u{u}.parquet")
        scores = rng.random(ROWS).astype(np.float32)
        scores[::37] = np.nan
        quality.append(f"steps/quality/ledger/u{u}.parquet")
        for rel, extra in ((dedup[-1], {"exact_dedup.group": rng.integers(0, 1 << 40, ROWS),
                                        "exact_dedup.group_size": sizes}),
                           (quality[-1], {"quality.score": scores})):
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({**base, **extra, "kept": [True] * ROWS,
                                     "reason": pa.nulls(ROWS, pa.string())}), out / rel)
    return {"steps": [{"name": "exact_dedup", "id": "exact_dedup_v1", "stage": "exact_dedup", "kind": "corpus",
                       "params": {}},
                      {"name": "quality", "id": "quality_v1", "stage": "quality_apply", "kind": "corpus",
                       "params": {"top_fraction": 0.1}, "cut": 0.75}],
            "stage_ledgers": {"exact_dedup": dedup, "quality_apply": quality}}


@pytest.fixture
def reads(monkeypatch):
    """The ``columns`` of every ``pyarrow.parquet.read_table`` and ``ParquetFile.read`` call."""
    seen: list = []
    real_table, real_read = pq.read_table, pq.ParquetFile.read

    def spy_table(path, *args, columns=None, **kw):
        seen.append(columns)
        return real_table(path, *args, columns=columns, **kw)

    def spy_read(self, columns=None, *args, **kw):
        seen.append(columns)
        return real_read(self, columns, *args, **kw)

    monkeypatch.setattr(pq, "read_table", spy_table)
    monkeypatch.setattr(pq.ParquetFile, "read", spy_read)
    return seen


def _whole(out: Path, files: list[str]) -> pa.Table:
    return pa.concat_tables([pq.read_table(out / f) for f in files], promote_options="permissive")


def test_funnel_details_equal_the_whole_stages_reading_one_column_of_one_part_at_a_time(tmp_path, reads):
    m = _parts(tmp_path, 6)
    dedup, quality = (_whole(tmp_path, m["stage_ledgers"][s]) for s in ("exact_dedup", "quality_apply"))
    reads.clear()
    got = details.step_details(tmp_path, m)
    assert reads and all(c is not None and len(c) == 1 for c in reads)  # never a whole part, never two columns
    assert got["exact_dedup_v1"]["clusters"] == {"column": "exact_dedup.group_size",
                                                 **details.cluster_sizes(dedup.column("exact_dedup.group_size").to_numpy())}
    want = details.score_histogram(quality.column("quality.score").to_numpy(zero_copy_only=False), 0.0, 1.0, cut=0.75)
    assert got["quality_v1"]["histogram"] == {"column": "quality.score", **want}


def test_report_histograms_equal_the_whole_stages_reading_one_column_at_a_time(tmp_path, reads):
    m = _parts(tmp_path, 6)
    want = []
    for stage, files in m["stage_ledgers"].items():
        table = _whole(tmp_path, files)
        for name in table.column_names:  # the statistics drawn: numeric, not an identifier (exact_dedup.group)
            if name in ("exact_dedup.group_size", "quality.score"):
                values = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
                marks = html.thresholds_of(next(e for e in m["steps"] if e["stage"] == stage))
                want.append(html.hist_svg(name, values, marks.get(name.split(".", 1)[1], ())))
    reads.clear()
    got = html.histograms(tmp_path, m)
    assert reads and all(c is not None and len(c) == 1 for c in reads)
    assert got == f'<div class="hists">{"".join(want)}</div>'
