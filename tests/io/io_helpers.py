"""Small shared helpers for the io tests: read everything a list of units gives."""

from __future__ import annotations

from tokenmill.io import read_unit


def read_all(units, **kw):
    """(rows, locs, rejects, skipped counts, nbytes) over all batches of all units, in order."""
    rows, locs, rejects, skipped, nbytes = [], [], [], {}, 0
    for unit in units:
        for batch in read_unit(unit, **kw):
            got = batch.to_rows()
            assert len(got) == len(batch.locs) == len(batch)
            rows.extend(got)
            locs.extend(batch.locs)
            rejects.extend(batch.rejects)
            nbytes += batch.nbytes
            for k, v in batch.skipped.items():
                skipped[k] = skipped.get(k, 0) + v
    return rows, locs, rejects, skipped, nbytes
