"""The decision ledger's join of a unit's stage parts equals the row-by-row join it replaced (kept here as the
oracle): by line where every row of both parts has a distinct one, by id or by line key by key otherwise."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from tokenmill.report import ledger

IDENTITY = ("id", "source", "loc", "url")


def oracle_join(tables: list[pa.Table]) -> pa.Table:
    first = tables[0]
    n = first.num_rows
    index = {k: i for i, k in enumerate(ledger._keys(first, False))}
    cols = {c: first.column(c) for c in IDENTITY if c in first.column_names}
    reason = np.array(first.column("reason").to_pylist(), dtype=object)
    stats = {c: first.column(c) for c in first.column_names if c not in (*IDENTITY, "kept", "reason")}
    for later in tables[1:]:
        where = np.full(n, -1, dtype=np.int64)
        for j, k in enumerate(ledger._keys(later, False)):
            i = index.get(k)
            if i is not None:
                where[i] = j
        picks = pa.array(where, mask=where < 0)
        for c in later.column_names:
            if c in (*IDENTITY, "kept", "reason"):
                continue
            stats[c if c not in stats else f"{c}@{len(stats)}"] = later.column(c).take(picks)
        theirs = np.array(later.column("reason").take(picks).to_pylist(), dtype=object)
        fresh = (reason == None) & (theirs != None)  # noqa: E711
        reason[fresh] = theirs[fresh]
    cols["url"] = cols.get("url", pa.nulls(n, pa.string()))
    cols["kept"] = pa.array(reason == None, pa.bool_())  # noqa: E711
    cols["reason"] = pa.array(reason.tolist(), pa.string())
    return pa.table({**cols, **stats})


def part(rng: random.Random, rows: list[int], stat: str, *, locs: bool = True, dup: bool = False) -> pa.Table:
    rows = list(rows)
    rng.shuffle(rows)
    if dup and len(rows) > 2:
        rows[1] = rows[0]
    data = {"id": [f"d{r}" for r in rows], "source": ["in.jsonl"] * len(rows),
            "loc": [r * 10 if locs else None for r in rows],
            stat: [rng.random() for _ in rows],
            "kept": [True] * len(rows),
            "reason": [rng.choice([None, None, f"{stat}_v1:low"]) for _ in rows]}
    return pa.table(data, schema=pa.schema([("id", pa.string()), ("source", pa.string()), ("loc", pa.int64()),
                                            (stat, pa.float64()), ("kept", pa.bool_()), ("reason", pa.string())]))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shape", ["lines", "later_without_lines", "duplicated_line", "first_without_lines"])
def test_join_equals_the_row_by_row_join(seed, shape):
    rng = random.Random(seed)
    n = rng.randint(0, 60)
    first_rows = list(range(n))
    first = part(rng, first_rows, "a", locs=shape != "first_without_lines", dup=shape == "duplicated_line")
    tables = [first]
    for k, stat in enumerate(("b", "c", "a")):  # "a" again: one step twice in a workflow
        kept = [r for r in first_rows if rng.random() < 0.7] + ([n + 5] if k == 1 else [])  # and a row first lacks
        tables.append(part(rng, kept, stat, locs=not (shape == "later_without_lines" and k == 1)))
    got, want = ledger._join(tables), oracle_join(tables)
    assert got.column_names == want.column_names
    assert got.equals(want), shape


def test_records_name_file_and_line_as_before():
    docs = part(random.Random(0), [1, 2], "a")
    table = ledger._with_rejects(ledger._join([docs]), [{"source": "in.jsonl", "loc": 7, "reason": "bad_json"},
                                                        {"source": None, "loc": None, "reason": "x"}])
    want = [f"{s}:{loc}" for s, loc in zip(table.column("source").to_pylist(), table.column("loc").to_pylist())]
    assert table.column("record").to_pylist() == want and table.schema.field("record").type == pa.string()
