"""WARC files for the consent tests, written by the tests: page responses with the HTTP headers and HTML a
crawl records, and a robots.txt WARC as Common Crawl publishes one per crawl."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

DATA = Path(__file__).with_name("consent_data")
ROBOTS_DIR = DATA / "robots"
ARTICLE = ("The committee met on Tuesday to discuss the new library budget and the opening hours of the branch. "
           "Researchers found that the river had carried far more sediment this spring than in any year before.")


def record(rtype: str, uri: str, block: bytes, *, date: str = "2024-05-01T00:00:00Z", rid: str = "1") -> bytes:
    extra = "Content-Type: application/http; msgtype=response\r\n" if rtype == "response" else ""
    head = (f"WARC/1.0\r\nWARC-Type: {rtype}\r\nWARC-Target-URI: {uri}\r\nWARC-Date: {date}\r\n"
            f"WARC-Record-ID: <urn:uuid:{rid}>\r\n{extra}Content-Length: {len(block)}\r\n\r\n")
    return gzip.compress(head.encode() + block + b"\r\n\r\n", mtime=0)


def http(body: bytes, *, status: str = "200 OK", ctype: str = "text/html; charset=utf-8",
         headers: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Type: {ctype}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def page(head: str = "", body: str = ARTICLE, footer: str = "") -> bytes:
    return (f"<html><head><title>t</title>{head}</head><body><article><h1>News</h1><p>{body}</p><p>{body}</p>"
            f"</article><footer>{footer}</footer></body></html>").encode()


def write_warc(path: Path, pages: list[dict]) -> Path:
    """``pages``: ``{"url", "html" (bytes), "headers", "date"}`` each; one response record per page."""
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = b"".join(record("response", p["url"], http(p.get("html") or page(), headers=p.get("headers")),
                           date=p.get("date", "2024-05-01T00:00:00Z"), rid=str(i)) for i, p in enumerate(pages))
    path.write_bytes(blob)
    return path


def write_robots_warc(path: Path, captures: list[tuple[str, str, bytes, str]]) -> Path:
    """``captures``: ``(host, date, robots.txt body, HTTP status)`` each, as a robots.txt WARC."""
    blob = b"".join(record("response", f"https://{host}/robots.txt", http(body, status=status, ctype="text/plain"),
                           date=date, rid=f"r{i}") for i, (host, date, body, status) in enumerate(captures))
    path.write_bytes(blob)
    return path


def jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# URL -> (robots.status, robots.allowed, robots.blocking_agent) under the default agents, read from the files
URLS = {
    # icon-icons.com: "User-agent: CCBot ... Disallow: /" among other bots, "*" allows everything
    "https://icon-icons.com/icon/cat/1": ("ok", False, "CCBot"),
    # foursquare.com: a "*" group that disallows /search, and CCBot among the bots disallowed everything
    "https://foursquare.com/v/some-venue/1": ("ok", False, "CCBot"),
    # www.gutenberg.org.txt judges gutenberg.org too (www. is the same host)
    "https://gutenberg.org/ebooks/1342": ("ok", False, "CCBot"),
    "https://www.blu-ray.com/movies/": ("ok", False, "CCBot"),
    # ccli.com's "robots.txt" in protego's data is an HTML page
    "https://ccli.com/about": ("unreadable", None, None),
    "https://no-robots.example.org/page": ("no_robots", None, None),
}
