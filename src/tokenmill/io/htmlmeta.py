"""The small parts of a page's HTML that consent and licence steps read: its ``<head>`` and its licence links.

Regular expressions over the raw HTML, not a parser: the head is everything up to the first ``</head>``
(or the first ``<body``), and a licence link is an ``<a>`` or ``<link>`` tag (or an RDF ``<license
rdf:resource>``) whose ``rel`` holds ``license`` or whose ``href`` is a Creative Commons licence or
public-domain deed. Each link keeps the 200
characters of HTML before it, so a reader can tell a page's own licence from a photo credit's.

Both read a page decoded by :func:`decode_html`: a UTF-16 or UTF-32 page read as UTF-8 has a NUL between
every letter, and its ``noai`` tag or licence link would match nothing.
"""

from __future__ import annotations

import codecs
import re

from tokenmill._extras import require

HEAD_LIMIT = 64 << 10
MAX_LINKS = 32
CONTEXT = 200
_HEAD_END = re.compile(r"</head\s*>|<body[\s>]", re.IGNORECASE)
_LINK = re.compile(r"<(?:a|link|license)\b[^>]*?(?:\brel\s*=\s*[\"']?[^\"'>]*\blicen[cs]e\b|creativecommons\.org/"
                   r"(?:licenses|publicdomain)/)[^>]*>", re.IGNORECASE)


_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))  # UTF-32-LE's BOM starts as UTF-16-LE's
_WIDE = ((re.compile(rb"^\x00\x00\x00[^\x00]"), "utf-32-be"), (re.compile(rb"^[^\x00]\x00\x00\x00"), "utf-32-le"),
         (re.compile(rb"^\x00[^\x00]\x00[^\x00]"), "utf-16-be"), (re.compile(rb"^[^\x00]\x00[^\x00]\x00"), "utf-16-le"))


def decode_html(body: bytes) -> str:
    """A page's HTML as text: by its byte-order mark; else, for UTF-16 and UTF-32 without one, by the NUL
    bytes around its first ASCII characters; else by resiliparse's detection (the ``warc`` extra), which
    misreads those two. Undecodable bytes become U+FFFD: a page is never lost to its encoding."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(name, errors="replace")
    for pattern, name in _WIDE:
        if pattern.match(body):
            return body.decode(name, errors="replace")
    encoding = require("resiliparse.parse.encoding", "warc", "decode HTML")
    return encoding.bytes_to_str(body, encoding.detect_encoding(body))


def html_head(html: str) -> str:
    """The page's head (up to ``</head>`` or ``<body``), at most :data:`HEAD_LIMIT` characters."""
    end = _HEAD_END.search(html, 0, HEAD_LIMIT + 16)
    return html[: end.start() if end else min(len(html), HEAD_LIMIT)][:HEAD_LIMIT]


def licence_links(html: str) -> list[dict[str, str]]:
    """Every licence-bearing link tag (at most :data:`MAX_LINKS`), as ``{"tag", "before"}``."""
    out = []
    for m in _LINK.finditer(html):
        out.append({"tag": m.group(0)[:1000], "before": html[max(0, m.start() - CONTEXT): m.start()]})
        if len(out) == MAX_LINKS:
            break
    return out
