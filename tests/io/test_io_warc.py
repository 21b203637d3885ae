import gzip

import pytest
from io_helpers import read_all

from tokenmill.io import expand_inputs, plan_units, sample_records

pytest.importorskip("fastwarc")
pytest.importorskip("resiliparse")

ARTICLE = "The quick brown fox jumps over the lazy dog near the quiet river bank every single morning."
PAGE = (
    f"<html><head><title>Fox</title></head><body><nav>Home | About</nav>"
    f"<article><h1>Fox news</h1><p>{ARTICLE}</p><p>{ARTICLE.upper()}</p></article></body></html>"
)


def _record(rtype: str, uri: str, block: bytes, extra: str = "", rid: str = "1") -> bytes:
    head = (
        f"WARC/1.0\r\nWARC-Type: {rtype}\r\nWARC-Target-URI: {uri}\r\nWARC-Date: 2024-05-01T00:00:00Z\r\n"
        f"WARC-Record-ID: <urn:uuid:{rid}>\r\n{extra}Content-Length: {len(block)}\r\n\r\n"
    )
    return head.encode() + block + b"\r\n\r\n"


def _http(status: str, ctype: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _warc_bytes() -> bytes:
    http_type = "Content-Type: application/http; msgtype=response\r\n"
    records = [
        _record("warcinfo", "", b"software: test\r\n", rid="0"),
        _record("request", "https://a.example/", b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", rid="1"),
        _record(
            "response",
            "https://a.example/",
            _http("200 OK", "text/html; charset=utf-8", PAGE.encode()),
            http_type,
            rid="2",
        ),
        _record(
            "response", "https://a.example/logo.png", _http("200 OK", "image/png", b"\x89PNG..."), http_type, rid="3"
        ),
        _record(
            "response",
            "https://a.example/gone",
            _http("404 Not Found", "text/html", b"<p>gone</p>"),
            http_type,
            rid="4",
        ),
        _record(
            "response",
            "https://a.example/empty",
            _http("200 OK", "text/html", b"<html><body></body></html>"),
            http_type,
            rid="5",
        ),
        _record(
            "response",
            "https://b.example/latin",
            _http("200 OK", "text/html", f"<html><body><p>{ARTICLE} Café crème.</p></body></html>".encode("cp1252")),
            http_type,
            rid="6",
        ),
    ]
    return b"".join(gzip.compress(r) for r in records)  # one gzip member per record, as crawlers write


def test_warc_html_responses_become_documents(tmp_path):
    p = tmp_path / "crawl.warc.gz"
    p.write_bytes(_warc_bytes())
    files = expand_inputs([str(p)])
    assert (files[0].format, files[0].compression) == ("warc", "gzip")
    rows, locs, rejects, skipped, nbytes = read_all(plan_units(files))
    assert locs == [3, 7]
    assert [r["url"] for r in rows] == ["https://a.example/", "https://b.example/latin"]
    assert rows[0]["id"] == "<urn:uuid:2>" and rows[0]["date"] == "2024-05-01T00:00:00Z"
    assert ARTICLE in rows[0]["text"] and "<p>" not in rows[0]["text"]
    assert "Café crème." in rows[1]["text"]
    assert [(r.loc, r.reason) for r in rejects] == [(6, "empty_text")]
    assert skipped == {"warc_not_html": 1, "warc_http_status": 1}
    assert nbytes == files[0].size


def test_wet_conversion_records(tmp_path):
    text = "Escopete\nUn lugar d'Aragón.\n"
    data = _record("warcinfo", "", b"x: y\r\n", rid="0") + _record(
        "conversion",
        "https://an.example/wiki/E",
        text.encode(),
        "WARC-Identified-Content-Language: arg,spa\r\nContent-Type: text/plain\r\n",
        rid="9",
    )
    p = tmp_path / "part.warc.wet.gz"
    p.write_bytes(gzip.compress(data))
    files = expand_inputs([str(p)])
    assert files[0].format == "wet"
    rows, locs, rejects, _, _ = read_all(plan_units(files))
    assert rows == [
        {
            "id": "<urn:uuid:9>",
            "url": "https://an.example/wiki/E",
            "date": "2024-05-01T00:00:00Z",
            "text": text,
            "language": "arg,spa",
        }
    ]
    assert locs == [2] and not rejects


def test_truncated_warc_is_not_a_traceback(tmp_path):
    data = _warc_bytes()
    p = tmp_path / "cut.warc.gz"
    p.write_bytes(data[: len(data) - 40])
    _, locs, _, _, _ = read_all(plan_units(expand_inputs([str(p)])))
    assert locs[0] == 3  # what came before the damage is read
    sample, slocs, _ = sample_records(expand_inputs([str(p)])[0], n=1)
    assert slocs == [3] and ARTICLE in sample[0]["text"]
