"""The small parts of a page's HTML that consent and licence steps read: its ``<head>`` and its licence links.

Regular expressions over the raw HTML, not a parser: the head is everything up to the first ``</head>``
(or the first ``<body``), and a licence link is an ``<a>`` or ``<link>`` tag (or an RDF ``<license
rdf:resource>``) whose ``rel`` holds ``license`` or whose ``href`` is a Creative Commons licence or
public-domain deed. Each link keeps the 200
characters of HTML before it, so a reader can tell a page's own licence from a photo credit's.
"""

from __future__ import annotations

import re

HEAD_LIMIT = 64 << 10
MAX_LINKS = 32
CONTEXT = 200
_HEAD_END = re.compile(r"</head\s*>|<body[\s>]", re.IGNORECASE)
_LINK = re.compile(r"<(?:a|link|license)\b[^>]*?(?:\brel\s*=\s*[\"']?[^\"'>]*\blicen[cs]e\b|creativecommons\.org/"
                   r"(?:licenses|publicdomain)/)[^>]*>", re.IGNORECASE)


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
