"""Licence names as data sets write them, folded to the ids the ``license`` allow-list compares (issue 42,
item 11): a spelling the normaliser misses is removed as ``not_allowed`` by a list that should keep it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tokenmill.curate.consent.license import License
from tokenmill.curate.consent.license_names import normalise_license

SPELLINGS = {
    "Apache License, Version 2.0": "apache-2.0", "Apache License Version 2.0": "apache-2.0", "Apache 2": "apache-2.0",
    "https://www.apache.org/licenses/LICENSE-2.0": "apache-2.0",
    "https://www.apache.org/licenses/LICENSE-2.0.txt": "apache-2.0",
    "CC0 1.0 Universal": "cc0-1.0", "CC0 1.0 Universal (CC0 1.0) Public Domain Dedication": "cc0-1.0", "CC0-1.0": "cc0-1.0",
    "https://creativecommons.org/publicdomain/zero/1.0/": "cc0-1.0",
    "https://creativecommons.org/licenses/by/4.0/deed.en": "cc-by-4.0",
    "http://creativecommons.org/licenses/by-sa/3.0/": "cc-by-sa-3.0",
    "creativecommons.org/licenses/by/4.0/legalcode": "cc-by-4.0",
    "Creative Commons Attribution 4.0 International": "cc-by-4.0",
    "Creative Commons Attribution-ShareAlike 4.0 International License": "cc-by-sa-4.0",
    "Creative Commons Attribution-NonCommercial-ShareAlike 3.0 Unported": "cc-by-nc-sa-3.0",
    "CC BY 4.0 International": "cc-by-4.0", "CC-BY-4.0": "cc-by-4.0", "CC BY-SA 4.0": "cc-by-sa-4.0",
    "The MIT License (MIT)": "mit", "https://opensource.org/licenses/MIT": "mit",
    'BSD 3-Clause "New" or "Revised" License': "bsd-3-clause", 'BSD 2-Clause "Simplified" License': "bsd-2-clause",
    "GNU General Public License v3.0": "gpl-3.0", "GNU General Public License v2.0 or later": "gpl-2.0-or-later",
    "GNU Lesser General Public License v2.1": "lgpl-2.1", "https://www.gnu.org/licenses/gpl-3.0.html": "gpl-3.0",
    "Mozilla Public License 2.0": "mpl-2.0", "Open Data Commons Attribution License": "odc-by", "The Unlicense": "unlicense",
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_common_spellings_fold_to_one_id(spelling):
    assert normalise_license(spelling) == SPELLINGS[spelling]


def test_the_permissive_allow_list_keeps_every_permissive_spelling():
    permissive = [s for s, label in SPELLINGS.items() if label in License().allow]
    step = License()
    scored = step.score(pa.record_batch({"text": ["x"] * len(permissive), "license": permissive}))
    assert list(step.decide({k: v.to_numpy(zero_copy_only=False) for k, v in scored.scores.items()})) == \
        [None] * len(permissive)
    assert len(permissive) == 22


def test_curate_keeps_documents_whose_field_spells_an_allowed_licence_out(tmp_path):
    import json

    import pyarrow.parquet as pq

    from tokenmill.curate.workflows.curate import run_curate

    rows = [{"text": f"Document {i} of the set.", "license": s} for i, s in enumerate(
        ["Apache License, Version 2.0", "CC0 1.0 Universal", "https://creativecommons.org/licenses/by/4.0/deed.en",
         "Creative Commons Attribution-NonCommercial 4.0 International"])]
    src = tmp_path / "in" / "docs.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "license"}], workers=1, report=False)
    assert m["counts"]["filtered"] == {"license_v2:not_allowed": 1}
    got = sorted(pq.read_table(tmp_path / "out" / "ledger").to_pylist(), key=lambda r: r["loc"])
    assert [r["license.label"] for r in got] == ["apache-2.0", "cc0-1.0", "cc-by-4.0", "cc-by-nc-4.0"]
