"""The cascade runner: first removing rule, modifiers feeding later steps, the ledger, the accounting identity."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from curatekit import ENGLISH, write_corpus

import statekit
from tokenmill.curate.filters.pii import Pii
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.records import DOCUMENT
from tokenmill.report.ledger import read_columns
from tokenmill.steps.build import build_step
from tokenmill.steps.cascade import Cascade


def LengthFilter(**params):
    return build_step({"name": "length", **params}, where="test")


def _docs(texts):
    n = len(texts)
    return pa.RecordBatch.from_pydict({"id": [f"d{i}" for i in range(n)], "text": texts, "source": ["s"] * n,
                                       "url": [None] * n, "license": [None] * n, "meta": [None] * n}, schema=DOCUMENT)


def test_first_removing_rule_is_the_reason_and_removed_documents_are_still_scored():
    cascade = Cascade((LengthFilter(min_chars=20, max_chars=60),))
    res = cascade(_docs(["short", "x" * 30, "y" * 100]), [1, 2, 3])
    assert res.ledger.column("reason").to_pylist() == ["length_v1:too_short", None, "length_v1:too_long"]
    assert res.ledger.column("length.chars").to_pylist() == [5, 30, 100]
    assert res.kept.column("text").to_pylist() == ["x" * 30]
    assert dict(res.filtered) == {"length_v1:too_short": 1, "length_v1:too_long": 1}


def test_modifier_text_reaches_later_steps_and_the_kept_documents():
    text = "mail me at someone.long.address@example.com please"
    cascade = Cascade((Pii(), LengthFilter(min_chars=len(text) - 5)))
    res = cascade(_docs([text]), [7])
    # after redaction the text is shorter than the threshold: the later step saw the rewritten text
    assert res.ledger.column("reason").to_pylist() == ["length_v1:too_short"]
    assert res.ledger.column("length.chars").to_pylist() == [len("mail me at <EMAIL> please")]
    assert res.counts["pii:email"] == 1 and res.ledger.column("loc").to_pylist() == [7]


def test_survivors_only_leaves_removed_documents_unscored():
    cascade = Cascade((LengthFilter(min_chars=10), Pii()), score_removed=False)
    res = cascade(_docs(["tiny", "long enough, write to a@b.org"]), [1, 2])
    assert res.ledger.column("pii.email").to_pylist() == [None, 1]


def test_steps_and_cascade_pickle():
    from tokenmill.curate.consent.license import License
    from tokenmill.curate.filters.language import Language
    from tokenmill.curate.filters.url import UrlFilter

    steps = (UrlFilter(block_domains=["a.com"]), Language(), License(), Pii())
    for s in steps:
        s.setup()
    clone = pickle.loads(pickle.dumps(Cascade(steps)))
    res = clone(_docs(ENGLISH[:2]), [1, 2])
    assert res.ledger.column("language.label").to_pylist() == ["en", "en"]


def test_curate_accounting_identity_with_filtered_by_step_and_rule(tmp_path):
    src = write_corpus(tmp_path / "web.jsonl")
    steps = [{"name": "url", "block_domains": ["blocked.test"]}, {"name": "language", "languages": ["en"]},
             {"name": "license", "unknown": "keep"}, {"name": "pii"}]
    m = run_curate([str(src)], out=tmp_path / "out", steps=steps, workers=1)
    c = m["counts"]
    assert c["balanced"] and c["input"] == c["kept"] + sum(c["filtered"].values()) + sum(c["rejected"].values())
    assert set(c["rejected"]) == {"wrong_type", "invalid_utf8", "malformed_json"}
    assert all(k.split(":")[0] in {"url_v1", "language_v1", "license_v2"} for k in c["filtered"])
    assert c["filtered"]["url_v1:blocked_domain"] == 2 and c["filtered"]["license_v2:not_allowed"] >= 1
    ledger = read_columns(tmp_path / "out" / "steps" / "curate" / "ledger" / "unit-000000.parquet")  # packed
    docs = pq.read_table(tmp_path / "out" / "documents" / "unit-000000.parquet")
    assert ledger.num_rows == c["input"] - sum(c["rejected"].values())
    assert sum(ledger.column("kept").to_pylist()) == docs.num_rows == c["kept"]
    reasons = [r for r in ledger.column("reason").to_pylist() if r]
    assert {r: reasons.count(r) for r in set(reasons)} == c["filtered"]
    assert docs.column_names[:6] == ["id", "text", "source", "url", "license", "meta"]
    assert all("<PHONE_NUMBER>" in t or "(814)" not in t for t in docs.column("text").to_pylist())
    # provenance: every ledger row names its file and line
    assert ledger.column("source").unique().to_pylist() == ["web.jsonl"]
    assert ledger.column("loc").to_pylist() == sorted(ledger.column("loc").to_pylist())
    assert m["funnel"]["kept"] == c["kept"]
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["identity"] == m["identity"]


def test_curate_same_bytes_with_one_or_two_workers(tmp_path):
    for i in range(3):
        write_corpus(tmp_path / "in" / f"f{i}.jsonl")
    steps = [{"name": "language", "languages": ["en"]}, {"name": "pii"}]
    a = run_curate([str(tmp_path / "in")], out=tmp_path / "a", steps=steps, workers=1, report=False)
    b = run_curate([str(tmp_path / "in")], out=tmp_path / "b", steps=steps, workers=2, report=False)
    assert a["counts"] == b["counts"]
    assert a["stage_packs"] == ["steps/curate/ledger-000000.zip"]  # the stage's parts, packed
    for rel in a["documents"] + a["decision_ledger"]["files"] + a["stage_packs"]:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()


def test_curate_refuses_sft_data(tmp_path):
    from tokenmill.errors import RoutingError

    rows = [{"messages": [{"role": "user", "content": f"hi {i}"}, {"role": "assistant", "content": "hello"}]}
            for i in range(20)]
    (tmp_path / "chat.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(RoutingError, match="chat.jsonl"):
        run_curate([str(tmp_path / "chat.jsonl")], out=tmp_path / "out", steps=[], workers=1)


def test_decide_sees_numpy_like_the_funnel():
    from tokenmill.steps.cascade import as_numpy

    assert as_numpy(pa.array(["a", None])).tolist() == ["a", None]
    assert as_numpy(np.array([1, 2])).dtype.kind == "i"


def test_curate_resumes_and_refuses_other_settings(tmp_path):
    from tokenmill.errors import ConfigError

    for i in range(2):
        write_corpus(tmp_path / "in" / f"f{i}.jsonl")
    steps = [{"name": "pii"}]
    small = {"workers": 1, "unit_bytes": 1024}  # several units (two small files would share one)
    first = run_curate([str(tmp_path / "in")], out=tmp_path / "out", steps=steps, report=False, **small)
    marker = statekit.reopen(tmp_path / "out", "curate_v1") / "unit-000001.json"
    marker.unlink()  # as if the run had been killed before its last unit committed
    before = (tmp_path / "out" / first["documents"][0]).stat().st_mtime_ns
    again = run_curate([str(tmp_path / "in")], out=tmp_path / "out", steps=steps, report=False, **small)
    assert again["counts"] == first["counts"] and "unit-000001" in statekit.committed(tmp_path / "out", "curate_v1")
    assert (tmp_path / "out" / first["documents"][0]).stat().st_mtime_ns == before  # unit 0 was not redone
    with pytest.raises(ConfigError, match="other inputs or settings"):
        run_curate([str(tmp_path / "in")], out=tmp_path / "out", steps=[{"name": "pii", "email": False}], **small)
