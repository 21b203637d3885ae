"""The consent steps through ``tokenmill curate``: robots.txt for AI crawlers (real robots.txt files from
protego's test data), TDM reservations from WARC headers and HTML, licences stated by pages, machine-written
text; their ledger columns, policies, errors and the ``consent`` preset."""

from __future__ import annotations

import json
import pickle
import shutil

import pyarrow.parquet as pq
import pytest
from consentkit import ARTICLE, DATA, ROBOTS_DIR, URLS, jsonl, page, write_robots_warc, write_warc

from tokenmill.cli import main
from tokenmill.curate.workflows.curate import run_curate

pytest.importorskip("protego")
pytest.importorskip("fastwarc")


def _by_url(out, src_rows) -> dict[str, dict]:
    ledger = pq.read_table(out / "ledger").to_pylist()
    return {src_rows[r["loc"] - 1]["url"]: r for r in ledger}


def test_robots_on_real_robots_txt_files_through_curate(tmp_path):
    rows = [{"text": ARTICLE, "url": u} for u in URLS] + [{"text": ARTICLE, "url": None}]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    m = run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "robots", "snapshot": str(ROBOTS_DIR)}],
                   workers=1, report=False)
    got = _by_url(tmp_path / "out", rows)
    for url, (status, allowed, agent) in URLS.items():
        r = got[url]
        assert (r["robots.status"], r["robots.allowed"], r["robots.blocking_agent"]) == (status, allowed, agent), url
    assert got[None]["robots.status"] == "no_url" and got[None]["kept"]
    assert got["https://gutenberg.org/ebooks/1342"]["robots.snapshot"].startswith("www.gutenberg.org.txt@")
    assert got["https://no-robots.example.org/page"]["kept"]  # default: kept, and counted by its status
    assert m["counts"]["filtered"] == {"robots_v2:disallowed": 4, "robots_v2:unreadable": 1}


def test_robots_blames_the_catch_all_group_when_no_named_agent_has_its_own(tmp_path):
    rows = [{"text": ARTICLE, "url": u} for u in ("https://foursquare.com/search?q=pizza", "https://foursquare.com/v/1")]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    run_curate([str(src)], out=tmp_path / "out", workers=1, report=False,
               steps=[{"name": "robots", "snapshot": str(ROBOTS_DIR), "agents": ["GPTBot", "*"]}])
    got = _by_url(tmp_path / "out", rows)
    assert got[rows[0]["url"]]["robots.blocking_agent"] == "*" and got[rows[1]["url"]]["robots.allowed"]


def test_robots_agrees_with_protego_on_every_snapshot_file(tmp_path):
    """The oracle: protego asked directly, agent by agent, for a path of every host."""
    from protego import Protego

    from tokenmill.curate.consent.robots import AI_AGENTS

    hosts = sorted(p.stem for p in ROBOTS_DIR.glob("*.txt") if p.stem != "ccli.com")
    paths = ["/", "/search", "/static/a.js", "/api/docs/", "/cgi-bin/x", "/ebooks/1"]
    rows = [{"text": ARTICLE, "url": f"https://{h}{p}"} for h in hosts for p in paths]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "robots", "snapshot": str(ROBOTS_DIR)}], workers=1,
               report=False)
    got = _by_url(tmp_path / "out", rows)
    for row in rows:
        host = row["url"].split("/")[2]
        rules = Protego.parse((ROBOTS_DIR / f"{host}.txt").read_text())
        assert got[row["url"]]["robots.allowed"] == all(rules.can_fetch(row["url"], a) for a in AI_AGENTS), row["url"]


def test_robots_warc_snapshot_judges_by_the_crawl_date(tmp_path):
    snap = write_robots_warc(tmp_path / "robots.warc.gz", [
        ("news.example", "2023-01-01T00:00:00Z", b"User-agent: *\nDisallow:\n", "200 OK"),
        ("news.example", "2024-03-01T00:00:00Z", b"User-agent: GPTBot\nDisallow: /\n", "200 OK"),
        ("gone.example", "2024-01-01T00:00:00Z", b"not found", "404 Not Found"),
        ("down.example", "2024-01-01T00:00:00Z", b"oops", "503 Service Unavailable"),
    ])
    crawl = write_warc(tmp_path / "in" / "crawl.warc.gz", [
        {"url": "https://news.example/a", "date": "2023-06-01T00:00:00Z"},  # before GPTBot was blocked
        {"url": "https://news.example/b", "date": "2024-06-01T00:00:00Z"},
        {"url": "https://gone.example/c"}, {"url": "https://down.example/d"},
    ])
    run_curate([str(crawl)], out=tmp_path / "out", steps=[{"name": "robots", "snapshot": str(snap)}], workers=1,
               report=False)
    got = {r["id"]: r for r in pq.read_table(tmp_path / "out" / "ledger").to_pylist()}
    a, b, c, d = (got[f"<urn:uuid:{i}>"] for i in range(4))
    assert a["kept"] and a["robots.snapshot"] == "robots.warc.gz#1@2023-01-01T00:00:00Z"
    assert b["reason"] == "robots_v2:disallowed" and b["robots.blocking_agent"] == "GPTBot"
    assert b["robots.snapshot"] == "robots.warc.gz#2@2024-03-01T00:00:00Z"
    assert c["robots.status"] == "no_robots" and c["kept"]  # a 404 robots.txt: nothing asked
    assert d["robots.status"] == "unreadable" and d["reason"] == "robots_v2:unreadable"  # RFC 9309: 5xx = disallow


def test_robots_policies_and_bad_parameters(tmp_path, capsys):
    rows = [{"text": ARTICLE, "url": "https://ccli.com/"}, {"text": ARTICLE, "url": "https://nothing.example/"}]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    m = run_curate([str(src)], out=tmp_path / "out", workers=1, report=False,
                   steps=[{"name": "robots", "snapshot": str(ROBOTS_DIR), "missing": "remove", "unreadable": "keep"}])
    assert m["counts"]["filtered"] == {"robots_v2:no_robots": 1}
    cfg = tmp_path / "p.yaml"
    for bad, words in [("{name: robots}", "snapshot: give the robots.txt snapshot"),
                       (f"{{name: robots, snapshot: {tmp_path}/none}}", "no file or directory"),
                       (f"{{name: robots, snapshot: {ROBOTS_DIR}, missing: drop}}", "expected keep or remove"),
                       (f"{{name: robots, snapshot: {ROBOTS_DIR}, agents: []}}", "agents: expected a list")]:
        cfg.write_text(f"steps:\n  - {bad}\n")
        assert main(["curate", str(src), "--out", str(tmp_path / "o"), "--config", str(cfg)]) == 1, bad
        assert words in capsys.readouterr().err


def test_robots_step_pickles_without_its_parsed_snapshot():
    from tokenmill.curate.consent.robots import Robots

    step = Robots(snapshot=str(ROBOTS_DIR))
    step.setup()
    clone = pickle.loads(pickle.dumps(step))
    assert clone._state is None and clone == step


TDM_PAGES = [
    # header values from Spawning-Inc/datadiligence tests/server/app.py
    {"url": "https://a.example/blocktdmrep", "headers": {"tdm-reservation": "1",
                                                          "tdm-policy": "http://localhost/test/policy.json"}},
    {"url": "https://a.example/tdmrep", "headers": {"tdm-reservation": "0"}},
    {"url": "https://a.example/noai", "headers": {"X-Robots-Tag": "noai"}},
    {"url": "https://a.example/user_agents", "headers": {"X-Robots-Tag": "demobot: noai, examplebot: noai, spawningbot: all"}},
    {"url": "https://a.example/meta", "html": page(head='<meta name="robots" content="noindex, noai, noimageai">')},
    {"url": "https://a.example/plain"},
]


def test_tdm_optout_reads_warc_headers_and_the_html_head(tmp_path):
    crawl = write_warc(tmp_path / "in" / "crawl.warc.gz", TDM_PAGES)
    m = run_curate([str(crawl)], out=tmp_path / "out", steps=[{"name": "tdm_optout"}], workers=1, report=False)
    got = {r["id"]: r for r in pq.read_table(tmp_path / "out" / "ledger").to_pylist()}
    want = [(True, "header:tdm-reservation", "http://localhost/test/policy.json"), (False, None, None),
            (True, "header:x-robots-tag", None), (False, None, None), (True, "meta:robots", None), (False, None, None)]
    for i, expected in enumerate(want):
        r = got[f"<urn:uuid:{i}>"]
        assert (r["tdm.reserved"], r["tdm.source"], r["tdm.policy"]) == expected, TDM_PAGES[i]["url"]
        assert r["url"] == TDM_PAGES[i]["url"]  # the ledger traces each decision to its page
    assert m["counts"]["filtered"] == {"tdm_v2:reserved": 3}
    docs = pq.read_table(tmp_path / "out" / "documents").to_pylist()
    meta = json.loads(docs[0]["meta"])
    assert meta["http_headers"]["tdm-reservation"] == "0" and "<title>t</title>" in meta["html_head"]


def test_tdmrep_json_in_the_snapshot_directory(tmp_path):
    snap = tmp_path / "snap"
    shutil.copytree(ROBOTS_DIR, snap)
    (snap / "rep.example.tdmrep.json").write_text(json.dumps([{"location": "/free/*", "tdm-reservation": 0},
                                                               {"location": "/*", "tdm-reservation": 1}]))
    (snap / "bad.example.tdmrep.json").write_text("{not json")
    rows = [{"text": ARTICLE, "url": u} for u in ("https://rep.example/news/1", "https://rep.example/free/2",
                                                  "https://bad.example/x")]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    m = run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "tdm_optout", "snapshot": str(snap)}], workers=1,
                   report=False)
    got = _by_url(tmp_path / "out", rows)
    assert got["https://rep.example/news/1"]["tdm.source"] == "tdmrep.json"
    assert [got[r["url"]]["kept"] for r in rows] == [False, True, True]
    assert m["counts"]["filtered"] == {"tdm_v2:reserved": 1}


def _licence_page(name: str) -> bytes:
    import gzip

    return gzip.decompress((DATA / "licence" / name).read_bytes())


def test_license_detection_from_real_pages_in_a_warc(tmp_path):
    crawl = write_warc(tmp_path / "in" / "crawl.warc.gz", [
        {"url": "https://blog.python.org/", "html": _licence_page("blog.python.org.html.gz")},
        {"url": "https://stackoverflow.com/q", "html": _licence_page("stackoverflow.com.rust.html.gz")},
        {"url": "https://theplanetarypress.com/", "html": _licence_page("theplanetarypress.com.forestlands.html.gz")},
    ])
    m = run_curate([str(crawl)], out=tmp_path / "out", steps=[{"name": "license", "detect": True, "unknown": "keep"}],
                   workers=1, report=False)
    got = [r for r in pq.read_table(tmp_path / "out" / "ledger").to_pylist()]
    assert [r["license.detected"] for r in got] == ["cc-by-nc-sa-3.0", "cc-by-sa-4.0", None]  # the last: a photo credit
    assert "creativecommons.org/licenses/by-nc-sa/3.0/" in got[0]["license.evidence"]
    assert m["counts"]["filtered"] == {"license_v2:not_allowed": 1}  # NC is not on the permissive allow-list


def test_license_field_wins_over_the_detected_licence(tmp_path):
    rows = [{"text": "Licensed under CC BY-NC 4.0.", "license": "MIT"}, {"text": "Licensed under CC BY-NC 4.0."},
            {"text": "SPDX-License-Identifier: Apache-2.0\nfn main() {}"}, {"text": "nothing stated", "license": "n/a"}]
    src = jsonl(tmp_path / "in" / "docs.jsonl", rows)
    run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "license", "detect": True}], workers=1, report=False)
    got = sorted(pq.read_table(tmp_path / "out" / "ledger").to_pylist(), key=lambda r: r["loc"])
    assert [(r["license.label"], r["license.origin"], r["license.detected"]) for r in got] == [
        ("mit", "field", "cc-by-nc-4.0"), ("cc-by-nc-4.0", "detected", "cc-by-nc-4.0"),
        ("apache-2.0", "detected", "apache-2.0"), (None, None, None)]
    assert [r["reason"] for r in got] == [None, "license_v2:not_allowed", None, "license_v2:unknown_license"]


def test_machine_text_threshold_and_record_only(tmp_path):
    rows = [{"text": "As an AI language model, I cannot browse the web. I hope this helps!"},
            {"text": "We delve into the rich tapestry of the valley, showcasing its meticulous terraces."},
            {"text": ARTICLE}]
    src = jsonl(tmp_path / "in" / "docs.jsonl", rows)
    m = run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "machine_text"}], workers=1, report=False)
    assert m["counts"]["filtered"] == {"machine_text_v2:machine_written": 2}
    got = sorted(pq.read_table(tmp_path / "out" / "ledger").to_pylist(), key=lambda r: r["loc"])
    assert got[0]["machine_text.evidence"] == "phrase:as an ai language model; phrase:i hope this helps"
    assert got[2]["machine_text.score"] == 0.0 and got[2]["machine_text.evidence"] is None
    m = run_curate([str(src)], out=tmp_path / "o2", steps=[{"name": "machine_text", "record_only": True}], workers=1,
                   report=False)
    assert m["counts"]["kept"] == 3
    assert main(["funnel", str(tmp_path / "out"), "--set", "machine_text.threshold=0.95", "--json"]) == 0


def test_machine_text_with_a_classifier_from_quality_train(tmp_path):
    pytest.importorskip("fasttext")
    from tokenmill.curate.quality.classifier import train_quality

    machine = [f"Certainly! Here is a comprehensive overview of topic {i}. It is crucial to note the nuanced, "
               "multifaceted landscape." for i in range(40)]
    human = [f"we went down to the river on day {i} and the water was cold and the dog would not swim" for i in range(40)]
    model = tmp_path / "machine.bin"
    train_quality(machine, human, out=model, quantize=False)  # quantising: test_quality.py
    src = jsonl(tmp_path / "in" / "docs.jsonl", [{"text": machine[0]}, {"text": human[0]}])
    run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "machine_text", "model": str(model)}], workers=1,
               report=False)
    got = sorted(pq.read_table(tmp_path / "out" / "ledger").to_pylist(), key=lambda r: r["loc"])
    assert got[0]["machine_text.model"] > 0.5 > got[1]["machine_text.model"]
    assert got[0]["machine_text.score"] >= got[0]["machine_text.model"]


@pytest.mark.parametrize("folder, misses", [("licence", set()), ("licence_heldout", {"wikipedia-4.html.gz"})])
def test_license_detection_on_the_labelled_pages(folder, misses):
    """The labels are a person's reading of each page (consent_data/README.md); the one miss is a footer that
    main-content extraction drops."""
    import orjson
    import pyarrow as pa

    from tokenmill.curate.consent.license import License
    from tokenmill.io.htmlmeta import licence_links
    from tokenmill.io.warc import html_to_text

    root = DATA / folder
    rows = [line.split("\t") for line in (root / "labels.tsv").read_text().splitlines()[1:]]
    pages = [gzip_html(root / name) for name, _ in rows]
    batch = pa.record_batch({"id": [n for n, _ in rows], "text": pa.array([html_to_text(h) for h in pages], pa.large_string()),
                             "meta": [orjson.dumps({"html_links": licence_links(h.decode("utf-8", "replace"))}).decode()
                                      for h in pages]})
    detected = License(detect=True).score(batch).scores["detected"].to_pylist()
    wrong = {name for (name, label), got in zip(rows, detected) if (got or "none") != label}
    assert wrong == misses


def gzip_html(path) -> bytes:
    import gzip

    return gzip.decompress(path.read_bytes())


@pytest.mark.realdata
def test_consent_preset_on_real_warcs(shared_data, tmp_path):
    """Common Crawl's own WARC record of an Aragonese Wikipedia page (which states CC BY-SA 4.0 in a
    ``<link rel="license">``) and dolma's wget crawl: headers and head reach the steps, the card loads."""
    warcs = [shared_data / "pretrain" / "cc_whirlwind.warc.gz", shared_data / "pretrain" / "dolma_sample-0000.warc.gz"]
    out = tmp_path / "out"
    assert main(["curate", *map(str, warcs), "--preset", "consent", "--robots-snapshot", str(ROBOTS_DIR),
                 "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    ledger = pq.read_table(out / "ledger").to_pylist()
    wiki = [r for r in ledger if r["source"].startswith("cc_whirlwind")]
    assert [r["license.detected"] for r in wiki] == ["cc-by-sa-4.0"] and wiki[0]["license.origin"] == "detected"
    docs = pq.read_table(out / "documents").to_pylist()
    metas = [json.loads(d["meta"]) for d in docs]
    assert len(docs) == len(ledger) and all("content-type" in m["http_headers"] for m in metas)
    assert all(r["robots.status"] == "no_robots" for r in ledger)  # none of these hosts is in the snapshot
    from huggingface_hub import DatasetCard

    card = json.loads((out / "datacard.json").read_text())
    assert card["licences"]["cc-by-sa-4.0"] == 1 and card["license"] == "other"  # one page's licence is not the set's
    assert DatasetCard.load(out / "datacard.md").data.license == ["other"]
    assert card["warnings"] == [f"robots: the snapshot {ROBOTS_DIR} holds a robots.txt for none of the {len(ledger)} "
                                "documents' hosts: nothing was judged. Give the crawl's own snapshot"]


def test_robots_without_protego_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "protego", None)  # as if it were not installed
    src = jsonl(tmp_path / "in" / "web.jsonl", [{"text": ARTICLE, "url": "https://example.com/"}])
    cfg = tmp_path / "p.yaml"
    cfg.write_text(f"steps:\n  - {{name: robots, snapshot: {ROBOTS_DIR}}}\n")
    assert main(["curate", str(src), "--out", str(tmp_path / "out"), "--config", str(cfg)]) == 1
    assert "pip install 'tokenmill[consent]'" in capsys.readouterr().err
