"""The consent steps on crawl metadata as users have it (issue 42, items 7-9): URLs without a scheme, URLs
that name no host, empty or damaged robots snapshots, oversized robots.txt files, internationalised host
names and file names in any case, UTF-16 and UTF-32 pages."""

from __future__ import annotations

import gzip
import json
import shutil

import pyarrow.parquet as pq
import pytest
from consentkit import ARTICLE, ROBOTS_DIR, URLS, http, jsonl, page, record, write_robots_warc, write_warc

from tokenmill.cli import main
from tokenmill.curate.consent.robots_snapshot import load_snapshot
from tokenmill.curate.workflows.curate import run_curate
from tokenmill.errors import InputError

pytest.importorskip("protego")
pytest.importorskip("fastwarc")


def _ledger(out) -> list[dict]:
    return sorted(pq.read_table(out / "ledger").to_pylist(), key=lambda r: (r["source"], r["loc"]))


def _robots(tmp_path, rows, snapshot=ROBOTS_DIR, **params):
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    m = run_curate([str(src)], out=tmp_path / "out", workers=1, report=False,
                   steps=[{"name": "robots", "snapshot": str(snapshot), **params}])
    return m, _ledger(tmp_path / "out")


# --- item 7: URLs without a scheme -------------------------------------------------------------------------


def test_urls_without_a_scheme_are_judged_as_the_crawl_fetched_them(tmp_path):
    """Dolma's metadata.url and Common Crawl index exports write ``host/path``: judged as https://host/path."""
    with_scheme = list(URLS)
    bare = [u.removeprefix("https://") for u in with_scheme] + ["//icon-icons.com/icon/cat/2"]
    rows = [{"text": ARTICLE, "url": u} for u in bare]
    m, got = _robots(tmp_path, rows)
    want = [URLS[u] for u in with_scheme] + [URLS["https://icon-icons.com/icon/cat/1"]]
    assert [(r["robots.status"], r["robots.allowed"], r["robots.blocking_agent"]) for r in got] == want
    assert m["counts"]["filtered"] == {"robots_v2:disallowed": 5, "robots_v2:unreadable": 1}


def test_the_dolma_layout_is_judged_through_curate(tmp_path):
    """The real Dolma record shape: ``metadata.url`` without a scheme, routed to ``url``."""
    rows = [{"id": str(i), "text": ARTICLE, "metadata": {"url": u.removeprefix("https://"), "warc_url": u}}
            for i, u in enumerate(URLS)]
    src = jsonl(tmp_path / "in" / "dolma.jsonl", rows)
    m = run_curate([str(src)], out=tmp_path / "out", workers=1, report=False,
                   steps=[{"name": "robots", "snapshot": str(ROBOTS_DIR)}])
    assert m["config"]["schemas"]["dolma.jsonl"]["url"] == "metadata.url"
    assert m["counts"]["filtered"]["robots_v2:disallowed"] == 4
    assert "no_url" not in {r["robots.status"] for r in _ledger(tmp_path / "out")}


def test_urls_that_name_no_host_fail_the_run_when_they_are_more_than_a_few(tmp_path, capsys):
    rows = [{"text": ARTICLE, "url": u} for u in ("N/A", "mailto:someone@example.com", "see page", "https://",
                                                  "https://icon-icons.com/icon/cat/1")]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    argv = ["curate", str(src), "--out", str(tmp_path / "out"), "--preset", "consent", "--robots-snapshot",
            str(ROBOTS_DIR), "--workers", "1", "--no-progress"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "robots: 4 of 5 URLs in a batch name no host (e.g. 'N/A')" in err and "Traceback" not in err


def test_one_stray_url_is_counted_not_failed_and_documents_without_urls_are_kept(tmp_path):
    rows = [{"text": ARTICLE, "url": f"https://icon-icons.com/icon/{i}"} for i in range(30)]
    rows += [{"text": ARTICLE, "url": "javascript:void(0)"}, {"text": ARTICLE}]
    m, got = _robots(tmp_path, rows)
    assert [r["robots.status"] for r in got[-2:]] == ["bad_url", "no_url"] and got[-1]["kept"] and got[-2]["kept"]


def test_tdmrep_json_applies_to_urls_without_a_scheme(tmp_path):
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "rep.example.tdmrep.json").write_text(json.dumps([{"location": "/*", "tdm-reservation": 1}]))
    src = jsonl(tmp_path / "in" / "web.jsonl", [{"text": ARTICLE, "url": "rep.example/news/1"}])
    m = run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "tdm_optout", "snapshot": str(snap)}],
                   workers=1, report=False)
    assert m["counts"]["filtered"] == {"tdm_v2:reserved": 1}


# --- item 8: empty, wrong, damaged and oversized snapshots -------------------------------------------------


@pytest.mark.parametrize("files", [[], ["README.md", "robots.tdmrep.json"]])
def test_a_snapshot_directory_without_robots_files_is_refused(tmp_path, capsys, files):
    snap = tmp_path / "snap"
    snap.mkdir()
    for name in files:
        (snap / name).write_text("x")
    src = jsonl(tmp_path / "in" / "web.jsonl", [{"text": ARTICLE, "url": "https://a.example/"}])
    assert main(["curate", str(src), "--out", str(tmp_path / "out"), "--preset", "consent", "--robots-snapshot",
                 str(snap), "--workers", "1", "--no-progress"]) == 1
    assert "holds no <host>.txt file" in capsys.readouterr().err


def _captures(n: int) -> list[tuple[str, str, bytes, str]]:
    return [(f"h{i}.example", "2024-01-01T00:00:00Z", b"User-agent: *\nDisallow: /\n" * 20, "200 OK") for i in range(n)]


def _fails_with(tmp_path, capsys, snapshot, words: list[str]) -> None:
    rows = [{"text": ARTICLE, "url": f"https://h{i}.example/page"} for i in range(10)]
    src = jsonl(tmp_path / "in" / "web.jsonl", rows)
    assert main(["curate", str(src), "--out", str(tmp_path / "out"), "--preset", "consent", "--robots-snapshot",
                 str(snapshot), "--workers", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(w in err for w in words), err


@pytest.mark.parametrize("damage", ["cut", "garbled"])
def test_a_robots_warc_damaged_inside_its_gzip_data_fails_with_the_offset(tmp_path, capsys, damage):
    whole = write_robots_warc(tmp_path / "whole.warc.gz", _captures(10)).read_bytes()
    sixth = len(write_robots_warc(tmp_path / "five.warc.gz", _captures(5)).read_bytes())  # where member 6 starts
    bad = tmp_path / "bad.warc.gz"
    bad.write_bytes(whole[: sixth + 100] if damage == "cut" else whole[: sixth + 20] + b"\x00" * 60 + whole[sixth + 80:])
    _fails_with(tmp_path, capsys, bad, ["robots snapshot", "bad.warc.gz", "is damaged or cut", "fetch the file again"])


@pytest.mark.parametrize("where", [300, 50])
def test_a_robots_warc_cut_inside_a_record_fails_with_the_offset(tmp_path, capsys, where):
    raw = gzip.decompress(write_robots_warc(tmp_path / "whole.warc.gz", _captures(10)).read_bytes())
    starts = [i for i in range(len(raw)) if raw.startswith(b"WARC/1.0\r\n", i)]
    cut = tmp_path / "cut.warc"
    cut.write_bytes(raw[: starts[5] + where])
    _fails_with(tmp_path, capsys, cut, [f"byte {starts[5]:,}", "cut", "fetch the file again"])


@pytest.mark.parametrize("body", [b"hello, this is not a WARC\n" * 50, gzip.compress(b"not a WARC either\n" * 50, mtime=0),
                                  b""], ids=["text", "gzip", "empty"])
def test_a_file_that_is_not_a_robots_warc_is_a_clear_error(tmp_path, capsys, body):
    snap = tmp_path / "robots.warc.gz"
    snap.write_bytes(body)
    _fails_with(tmp_path, capsys, snap, ["robots snapshot", str(snap)])


def test_only_the_first_500_kib_of_a_robots_txt_is_read(tmp_path):
    """RFC 9309 §2.5: a rule after the first 500 KiB is not read (a 30 MB file would cost minutes and GBs)."""
    from tokenmill.curate.consent.robots_snapshot import MAX_ROBOTS_BYTES, decode_robots

    padding = b"# " + b"x" * 98 + b"\n"
    body = b"User-agent: GPTBot\nDisallow: /early/\n" + padding * (MAX_ROBOTS_BYTES // len(padding)) + \
        b"User-agent: *\nDisallow: /\n"
    assert len(body) > MAX_ROBOTS_BYTES and "Disallow: /\n" not in decode_robots(body)[-100:]
    snap = write_robots_warc(tmp_path / "robots.warc.gz", [("big.example", "2024-01-01T00:00:00Z", body, "200 OK")])
    d = tmp_path / "snap"
    d.mkdir()
    (d / "big.example.txt").write_bytes(body)
    rows = [{"text": ARTICLE, "url": u} for u in ("https://big.example/early/1", "https://big.example/late/1")]
    for i, s in enumerate((snap, d)):
        src = jsonl(tmp_path / f"in{i}" / "web.jsonl", rows)
        run_curate([str(src)], out=tmp_path / f"out{i}", workers=1, report=False,
                   steps=[{"name": "robots", "snapshot": str(s)}])
        assert [r["robots.allowed"] for r in _ledger(tmp_path / f"out{i}")] == [False, True], s


# --- item 9: host names in either form, file names in any case, wide encodings -----------------------------


def test_idn_and_punycode_hosts_and_upper_case_file_names_match(tmp_path):
    snap = tmp_path / "snap"
    snap.mkdir()
    disallow = "User-agent: *\nDisallow: /\n"
    (snap / "bücher.example.txt").write_text(disallow)
    (snap / "xn--mnchen-3ya.example.txt").write_text(disallow)  # münchen.example
    shutil.copy(ROBOTS_DIR / "icon-icons.com.txt", snap / "ICON-ICONS.COM.TXT")
    rows = [{"text": ARTICLE, "url": u} for u in ("https://xn--bcher-kva.example/a", "https://BÜCHER.example/b",
                                                  "https://münchen.example/c", "https://icon-icons.com/icon/1")]
    m, got = _robots(tmp_path, rows, snapshot=snap)
    assert [r["robots.status"] for r in got] == ["ok"] * 4 and not any(r["kept"] for r in got)


def test_tdmrep_file_names_in_either_form_match(tmp_path):
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "bücher.example.TDMREP.JSON").write_text(json.dumps([{"location": "/*", "tdm-reservation": 1}]))
    src = jsonl(tmp_path / "in" / "web.jsonl", [{"text": ARTICLE, "url": "https://xn--bcher-kva.example/x"}])
    m = run_curate([str(src)], out=tmp_path / "out", steps=[{"name": "tdm_optout", "snapshot": str(snap)}],
                   workers=1, report=False)
    assert m["counts"]["filtered"] == {"tdm_v2:reserved": 1}


WIDE = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "utf-8-sig"]


@pytest.mark.parametrize("encoding", WIDE)
def test_noai_and_licence_links_are_read_in_utf16_and_utf32_pages(tmp_path, encoding):
    noai = page(head='<meta name="robots" content="noai">').decode().encode(encoding)
    licensed = page(footer='<a rel="license" href="https://creativecommons.org/licenses/by-sa/4.0/">CC</a>',
                    body=ARTICLE + " Über die Brücke.").decode().encode(encoding)
    crawl = tmp_path / "in" / "crawl.warc.gz"
    crawl.parent.mkdir(parents=True)
    crawl.write_bytes(b"".join(record("response", f"https://a.example/{i}", http(body, ctype="text/html"), rid=str(i))
                               for i, body in enumerate((noai, licensed))))
    m = run_curate([str(crawl)], out=tmp_path / "out", workers=1, report=False,
                   steps=[{"name": "tdm_optout"}, {"name": "license", "detect": True, "unknown": "keep"}])
    got = {r["id"]: r for r in pq.read_table(tmp_path / "out" / "ledger").to_pylist()}
    assert got["<urn:uuid:0>"]["tdm.source"] == "meta:robots"
    assert got["<urn:uuid:1>"]["license.detected"] == "cc-by-sa-4.0"
    docs = pq.read_table(tmp_path / "out" / "documents").to_pylist()
    assert "Über die Brücke" in docs[0]["text"] and "\x00" not in docs[0]["text"]
    assert m["counts"]["filtered"] == {"tdm_v2:reserved": 1}


def test_a_warc_of_pages_without_robots_txt_records_is_refused(tmp_path):
    snap = write_warc(tmp_path / "pages.warc.gz", [{"url": "https://a.example/x"}])
    with pytest.raises(InputError, match="no robots.txt response record"):
        load_snapshot(str(snap))
