"""Which licence does a page state for itself? Evidence from its HTML links, its text and its code.

Three kinds of evidence, read in this order (the first that names a licence wins):

1. **links** (WARC input: ``meta.html_links``; any input: a raw ``meta.html`` column): an ``<a>``/``<link>``
   tag with ``rel="license"`` or an ``href`` to a Creative Commons deed
   (``creativecommons.org/licenses/by-sa/4.0/`` -> ``cc-by-sa-4.0``, ``/publicdomain/zero/1.0/`` ->
   ``cc0-1.0``, ``/publicdomain/mark/1.0/`` -> ``public-domain``); a ``rel="license"`` link elsewhere
   when its last path segment names a licence (``opensource.org/licenses/MIT``, ``gnu.org/licenses/gpl-3.0``;
   not ``#license`` or a wiki page about the licence, which leave the decision to the text);
2. **badge text** in the extracted text: ``licensed under a Creative Commons Attribution-ShareAlike 4.0
   ...``, ``CC BY-NC 4.0``, ``CC0``;
3. **SPDX identifiers** in code: ``SPDX-License-Identifier: Apache-2.0``.

A licence that only credits a picture is not the page's: a link or badge whose preceding 200 characters
(or whose line) mention a photo, image, picture, credit, caption, Flickr (``Foto``, ``Bild`` and ``Image``
in German and French too) is skipped. The result is a normalised id (see
:func:`tokenmill.curate.consent.license_names.normalise_license`) and the matched string as evidence.
"""

from __future__ import annotations

import re
from typing import Any

from tokenmill.curate.consent.license_names import cc_from_url, normalise_license
from tokenmill.io.htmlmeta import licence_links

_HREF = re.compile(r"""\bhref\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_REL_LICENSE = re.compile(r"""\brel\s*=\s*["']?[^"'>]*\blicen[cs]e\b""", re.IGNORECASE)
_CREDIT = re.compile(r"foto|photo|image|picture|bild|credit|caption|flickr|<img|wp-caption|getty|shutterstock",
                     re.IGNORECASE)
_WORDS = {"attribution": "by", "noncommercial": "nc", "sharealike": "sa", "noderivatives": "nd", "noderivs": "nd"}
_BADGE_LONG = re.compile(r"creative\s+commons\s+((?:attribution|non-?commercial|share-?alike|no-?deriv(?:ative)?s)"
                         r"(?:[\s-]+(?:attribution|non-?commercial|share-?alike|no-?deriv(?:ative)?s))*)"
                         r"(?:\s+(?:licen[cs]e\s+)?(?:version\s+|v)?(\d\.\d))?", re.IGNORECASE)
_BADGE_SHORT = re.compile(r"\bCC[\s-]?(BY(?:[\s-](?:NC|SA|ND))*)(?:[\s-]v?(\d\.\d))?\b|\bCC0(?:[\s-]1\.0)?\b",
                          re.IGNORECASE)
_SPDX = re.compile(r"SPDX-License-Identifier:\s*([A-Za-z0-9.+-]+)")


def from_links(links: Any) -> tuple[str, str] | None:
    """The first page-level licence among ``[{"tag", "before"}]`` links: ``(licence, tag)``."""
    for link in links if isinstance(links, list) else []:
        tag = str(link.get("tag", "")) if isinstance(link, dict) else str(link)
        before = str(link.get("before", "")) if isinstance(link, dict) else ""
        if _CREDIT.search(before[-200:]) or _CREDIT.search(tag):
            continue
        href = _HREF.search(tag)
        found = cc_from_url(href.group(1) if href else tag)
        if found is None and href and _REL_LICENSE.search(tag):
            found = _spdx_like(normalise_license(href.group(1).rstrip("/").rsplit("/", 1)[-1]))
        if found:
            return found, tag
    return None


_KNOWN = re.compile(r"(?:mit|isc|unlicense|0bsd|wtfpl|zlib|public-domain|cc0-1\.0|odc-by|pddl|odbl|"
                    r"(?:apache|mpl|epl|gpl|lgpl|agpl|gfdl)-\d\.\d(?:-only|-or-later)?|bsd-[234]-clause)")


def _spdx_like(label: str | None) -> str | None:
    """A licence id read off a ``rel="license"`` URL's last segment, when it names one (``opensource.org/licenses/
    MIT``); None for a page name such as ``#license`` or ``Wikipedia:Text_of_the_...`` (the text may then say)."""
    return label if label and _KNOWN.fullmatch(label) else None


def _badge(m: re.Match) -> str | None:
    if m.re is _BADGE_LONG:
        words = re.sub(r"(non|share|no)-", r"\1", m.group(1).lower())
        codes = [_WORDS[w] for w in re.split(r"[\s-]+", words) if w in _WORDS]
        version = m.group(2)
    elif m.group(0).lower().startswith("cc0"):
        return "cc0-1.0"
    else:
        codes = [c.lower() for c in re.split(r"[\s-]+", m.group(1))]
        version = m.group(2)
        if not version and not m.group(0).isupper():
            return None  # "cc by email": a lowercase badge counts only with its version
    if not codes or codes[0] != "by":
        return None
    return "cc-" + "-".join(codes) + (f"-{version}" if version else "")


def from_text(text: str | None) -> tuple[str, str] | None:
    """A licence badge or an SPDX identifier in the extracted text: ``(licence, matched string)``."""
    if not text:
        return None
    spdx = _SPDX.search(text)
    candidates = sorted([*_BADGE_LONG.finditer(text), *_BADGE_SHORT.finditer(text)], key=lambda m: m.start())
    for m in candidates:
        end = text.find("\n", m.end())  # the end of the line the badge is on
        line = text[text.rfind("\n", 0, m.start()) + 1: end if end >= 0 else len(text)]
        if _CREDIT.search(line):
            continue
        found = _badge(m)
        if found:
            return found, m.group(0)
    if spdx:
        found = normalise_license(spdx.group(1))
        return (found, spdx.group(0)) if found else None
    return None


def detect_licence(text: str | None, meta: dict) -> tuple[str | None, str | None]:
    """``(licence, evidence)`` of one document (both None when it states none)."""
    found = from_links(meta.get("html_links"))
    if found is None and isinstance(meta.get("html"), str):
        found = from_links(licence_links(meta["html"]))
    found = found or from_text(text)
    return found if found else (None, None)
