"""The language, url, license and pii steps on small hand-made inputs (real models and regexes)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmill.curate.consent.license import License, normalise_license
from tokenmill.curate.filters.language import Language, normalise_codes
from tokenmill.curate.filters.pii import Pii
from tokenmill.curate.filters.url import UrlFilter
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.errors import ConfigError
from tokenmill.steps.build import build_steps
from tokenmill.steps.cascade import as_numpy


def _run(step, **cols):
    n = len(next(iter(cols.values())))
    cols.setdefault("text", ["x"] * n)
    batch = pa.RecordBatch.from_pydict(cols)
    step.setup()
    scored = step.score(batch)
    decided = step.decide({k: as_numpy(v) for k, v in scored.scores.items()})
    return {k: as_numpy(v).tolist() for k, v in scored.scores.items()}, list(decided)


# --- url ---------------------------------------------------------------------------------------------

def test_url_blocks_hosts_and_subdomains_by_exact_labels():
    urls = ["https://www.example.com/a", "http://a.b.example.com/x", "http://notexample.com/", "https://example.com.au/",
            "http://EXAMPLE.COM:8080/p", "https://sussex.ac.uk/sex-shop", "https://ok.org/free-porn-now"]
    scores, rules = _run(UrlFilter(block_domains=["example.com"], banned_words=["sex"]), url=urls)
    assert rules == ["blocked_domain", "blocked_domain", None, None, "blocked_domain", "banned_word", "banned_word"]
    assert scores["host"][:3] == ["example.com", "a.b.example.com", "notexample.com"]


def test_url_garbage_is_a_status_never_an_error():
    urls = ["not a url", "", None, "http://", "::::", "a" * 5000, "http://exa mple.com/", "javascript:alert(1)",
            "http://münchen.de/straße"]
    scores, rules = _run(UrlFilter(), url=urls)
    assert scores["status"] == ["invalid", "missing", "missing", "invalid", "invalid", "invalid", "invalid", "invalid", "ok"]
    assert rules == [None] * len(urls)
    _, strict = _run(UrlFilter(invalid="remove", missing="remove"), url=urls)
    assert strict[:3] == ["invalid_url", "missing_url", "missing_url"] and strict[-1] is None


def test_url_lists_from_files_ut1_categories_allow_and_soft_words(tmp_path):
    (tmp_path / "blocked.txt").write_text("# comment\nbad.test\nwww.worse.test\n\n")
    ut1 = tmp_path / "ut1"
    ut1.mkdir()
    (ut1 / "gambling_domains.txt").write_text("casino.test\n")
    (ut1 / "gambling_urls.txt").write_text("host.test/poker/room\n")
    (tmp_path / "allow.txt").write_text("fine.bad.test\n")
    step = UrlFilter(domain_files=[str(tmp_path / "blocked.txt")], ut1=str(ut1), categories=["gambling"],
                     allow_files=[str(tmp_path / "allow.txt")], soft_words=["cheap", "deal"], default=False)
    urls = ["http://x.bad.test/", "http://worse.test/", "https://casino.test/", "http://host.test/poker/room/",
            "http://host.test/poker", "http://fine.bad.test/porn", "http://shop.test/cheap-deal", "http://shop.test/cheap"]
    scores, rules = _run(step, url=urls)
    assert rules == ["blocked_domain", "blocked_domain", "blocked_domain", "blocked_url", None, None,
                     "soft_banned_words", None]
    assert scores["category"][2:4] == ["ut1:gambling", "ut1:gambling"]
    with pytest.raises(ValueError, match="no file"):
        UrlFilter(domain_files=[str(tmp_path / "nope.txt")])
    with pytest.raises(ValueError, match="adult"):
        UrlFilter(ut1=str(ut1), categories=["adult"])


def test_url_default_list_and_real_ut1_files(shared_data):
    ut1 = shared_data / "curation" / "blocklists" / "ut1"
    step = UrlFilter(ut1=str(ut1), categories=["gambling", "dating"])
    first = (ut1 / "gambling_domains.txt").read_text().split()[0]
    scores, rules = _run(step, url=[f"https://www.{first}/", f"https://sub.{first}/x", f"https://{first}.example.org/",
                                    "https://en.wikipedia.org/wiki/Casino", "https://a.test/xxx/"])
    assert rules == ["blocked_domain", "blocked_domain", None, None, "banned_word"]


# --- language ----------------------------------------------------------------------------------------

def test_language_labels_scores_and_rules():
    texts = ["The weather was lovely and we walked along the river until the sun went down.",
             "Das Wetter war schön und wir sind am Fluss entlang gelaufen, bis die Sonne unterging.",
             "Været var fint, og vi gikk langs elva til sola gikk ned bak fjellene i vest.",
             "12345 67890"]
    scores, rules = _run(Language(languages=["en", "no"], threshold=0.5), text=texts)
    assert scores["label"][:3] == ["en", "de", "nb"]
    assert rules[:3] == [None, "wrong_language", None] and rules[3] is not None
    assert all(0 <= s <= 1 for s in scores["score"])


def test_language_codes_and_bad_parameters(tmp_path):
    assert normalise_codes(["eng", "no", "pt-BR", "zsm"]) == ("en", "nb", "nn", "pt", "ms")
    with pytest.raises(ConfigError) as exc:
        build_steps([{"name": "language", "threshold": 2}, {"name": "language", "languages": "en", "model": "missing.npz.xz"},
                     {"name": "language", "languages": [1]}], source="p.yaml")
    text = str(exc.value)
    assert "steps[0]: threshold" in text and "no language-ID model file" in text and "steps[2]: languages" in text


def test_language_missing_package_is_a_clear_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "py3langid" else real(name, *a))
    with pytest.raises(ConfigError, match=r"pip install 'tokenmill\[curate\]'"):
        build_steps([{"name": "language"}])


# --- license -----------------------------------------------------------------------------------------

def test_license_normalisation_allow_list_and_unknown_policy():
    assert [normalise_license(s) for s in ["CC BY 4.0", "Apache License 2.0", "MIT License", "CC0", "unknown", " "]] == \
        ["cc-by-4.0", "apache-2.0", "mit", "cc0-1.0", None, None]
    lic = ["MIT", None, "GPL-3.0", "cc by-sa 4.0", "n/a"]
    scores, rules = _run(License(), license=lic)
    assert scores["label"] == ["mit", None, "gpl-3.0", "cc-by-sa-4.0", None]
    assert rules == [None, "unknown_license", "not_allowed", None, "unknown_license"]
    assert _run(License(allow=["gpl-3.0"], unknown="keep"), license=lic)[1] == ["not_allowed", None, None, "not_allowed", None]


# --- pii ---------------------------------------------------------------------------------------------

POSITIVE = [("write to john.doe@example.co.uk today", "write to <EMAIL> today"),
            ("ip 10.41.21.72 and 192.168.0.12?", "ip <IP_ADDRESS> and <IP_ADDRESS>?"),
            ("v6 2001:db8::1 here", "v6 <IP_ADDRESS> here"),
            ("call (814) 360 8593 or +1-212-456-7890", "call <PHONE_NUMBER> or <PHONE_NUMBER>"),
            ("+44 20 7946 0958", "<PHONE_NUMBER>"), ("2312322334", "<PHONE_NUMBER>")]
NEGATIVE = ["version 1.2.3.4 released", "python 3.11.4 and v1.2.3.4 and 1.2.3.4.5", "on 2021-03-04 or 03/04/2021 or 12.03.2021",
            "costs $1,234.56 or 1.234,56 EUR or 1,234,567", "ISBN 0306406152, Unix time 1609459200", "at 12:30:45 in std::vector",
            "card 4095-2609-9393-4932, ssn 078-05-1126", "chapter 10.2.1 and section 3.4"]


@pytest.mark.parametrize("text, expected", POSITIVE)
def test_pii_replaces_each_type(text, expected):
    assert Pii().redact(text)[0] == expected


@pytest.mark.parametrize("text", NEGATIVE)
def test_pii_leaves_versions_dates_prices_alone(text):
    assert Pii().redact(text) == (text, {"email": 0, "ip": 0, "phone": 0})


def test_pii_counts_per_type_and_only_rewrites():
    batch = pa.RecordBatch.from_pydict({"text": ["a@b.org and c@d.net", "no pii here", "10.0.0.1 / (231) 232-2334"]})
    scored = Pii().score(batch)
    assert scored.text.to_pylist() == ["<EMAIL> and <EMAIL>", "no pii here", "<IP_ADDRESS> / <PHONE_NUMBER>"]
    assert dict(scored.counts) == {"pii:email": 2, "pii:ip": 1, "pii:phone": 1}
    assert list(Pii().decide(scored.scores)) == [None, None, None]


def test_pii_precision_on_labelled_examples(shared_data):
    import re

    from tokenmill.curate.filters.pii import EMAIL, IPV4, PHONE  # noqa: F401  (the patterns under test)

    kinds = {"email": "<EMAIL>", "ip_address": "<IP_ADDRESS>", "phone_number": "<PHONE_NUMBER>"}
    tp = fp = fn = 0
    for path in sorted((shared_data / "curation" / "pii").glob("nemo_curator_pii_*.txt")):
        for line in path.read_text().splitlines():
            expected = re.sub(r"<(\w+)>(.*?)</\1>", lambda m: kinds.get(m.group(1), m.group(2)), line)
            plain = re.sub(r"</?\w+>", "", line)
            got, counts = Pii().redact(plain)
            want = sum(expected.count(v) for v in kinds.values())
            made = sum(counts.values())
            if got == expected:
                tp += made
            else:
                hit = min(made, want)
                tp, fp, fn = tp + hit, fp + made - hit, fn + want - hit
    assert fp == 0 and tp >= 12, (tp, fp, fn)


# --- bad input end to end ----------------------------------------------------------------------------

def test_garbage_url_column_in_parquet_never_raises(tmp_path):
    pq.write_table(pa.table({"text": ["first document text", "second document text"],
                             "url": pa.array([{"a": 1}, {"a": 2}])}), tmp_path / "g.parquet")
    m = run_curate([str(tmp_path / "g.parquet")], out=tmp_path / "out", steps=[{"name": "url", "invalid": "remove"}],
                   workers=1, force=True, schemas={"*": {"record": "Document", "text": "text", "url": "url"}})
    assert m["counts"]["filtered"] == {"url_v1:invalid_url": 2} and m["counts"]["balanced"]


def test_every_step_pickles_with_its_model_dropped():
    step = Language()
    step.setup()
    clone = pickle.loads(pickle.dumps(step))
    assert clone._identifier is None and clone == step
    clone.setup()
    assert np.isfinite(_run(clone, text=["hello there my friend"])[0]["score"][0])


# --- building ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NamedOnly:
    """A name and a version, but neither score and decide nor stages: not a step."""

    name: str = "named_only"
    version: int = 1


def test_a_step_object_that_breaks_the_contract_is_refused_before_any_work():
    """An object given in place of a spec is held to the contract like a built one (it used to be taken as it was,
    and failed deep inside a worker)."""
    with pytest.raises(ConfigError, match=r"p\.yaml: steps\[0\]: NamedOnly is not a step"):
        build_steps([NamedOnly()], source="p.yaml")
    (length,) = build_steps([{"name": "length", "min_chars": 2}])
    assert build_steps([length]) == [length]
