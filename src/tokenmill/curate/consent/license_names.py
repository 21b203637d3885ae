"""Licence names normalised to SPDX-like ids (``CC BY 4.0`` -> ``cc-by-4.0``): the one spelling the
``license`` step (:mod:`tokenmill.curate.consent.license`) and licence detection
(:mod:`tokenmill.curate.consent.license_detect`) compare.

What a data set's ``license`` field holds in practice, all folded to one id: SPDX ids (``Apache-2.0``),
licence titles as the licence texts write them (``Apache License, Version 2.0``, ``The MIT License (MIT)``,
``GNU General Public License v3.0``, ``BSD 3-Clause "New" or "Revised" License``), Creative Commons names
(``CC0 1.0 Universal``, ``Creative Commons Attribution-ShareAlike 4.0 International``, ``CC-BY-4.0``) and
licence URLs (``https://creativecommons.org/licenses/by/4.0/deed.en``,
``https://opensource.org/licenses/MIT``, ``https://www.apache.org/licenses/LICENSE-2.0``). A spelling not
folded here stays as written (lowercased, dashed): an allow-list then treats it as a licence it does not
know, never as one it allows.
"""

from __future__ import annotations

import re

PLACEHOLDERS = ("unknown", "none", "n/a", "na", "other", "null", "unspecified", "-")
FOLDS = {"cc0": "cc0-1.0", "cc-zero": "cc0-1.0", "pd": "public-domain", "public-domain-mark": "public-domain",
         "apache": "apache-2.0", "apache-2": "apache-2.0", "apache-v2": "apache-2.0", "apache-v2.0": "apache-2.0",
         "bsd-3": "bsd-3-clause", "bsd-2": "bsd-2-clause", "bsd": "bsd-3-clause", "gpl-3": "gpl-3.0",
         "gpl-2": "gpl-2.0", "gplv3": "gpl-3.0", "gplv2": "gpl-2.0", "mit-license": "mit", "mit-mit": "mit",
         "odc-attribution": "odc-by", "open-data-commons-attribution": "odc-by"}
_CC_URL = re.compile(r"creativecommons\.org/(licenses|publicdomain)/([a-z-]+)(?:/(\d\.\d))?", re.IGNORECASE)
_URL = re.compile(r"^(?:https?:)?//|^www\.|^[\w-]+(?:\.[\w-]+)+/", re.IGNORECASE)
# words of a licence's title that name no licence: "Version 2.0", "4.0 International", "1.0 Universal"
_NOISE = re.compile(r"\((?:[^()]*)\)|\"[^\"]*\"(?:\s+or\s+\"[^\"]*\")?|,|\b(?:version|international|universal|"
                    r"unported|generic|deed)\b|\bpublic\s+domain\s+dedication$|^the\s+", re.IGNORECASE)
_TITLES = ((re.compile(r"\bgnu\s+(?:lesser|library)\s+general\s+public\s+licen[cs]e\b"), "lgpl"),
           (re.compile(r"\bgnu\s+affero\s+general\s+public\s+licen[cs]e\b"), "agpl"),
           (re.compile(r"\bgnu\s+free\s+documentation\s+licen[cs]e\b"), "gfdl"),
           (re.compile(r"\bgnu\s+general\s+public\s+licen[cs]e\b"), "gpl"),
           (re.compile(r"\bmozilla\s+public\s+licen[cs]e\b"), "mpl"),
           (re.compile(r"\beclipse\s+public\s+licen[cs]e\b"), "epl"))
_CC_WORDS = {"attribution": "by", "noncommercial": "nc", "sharealike": "sa", "noderivatives": "nd", "noderivs": "nd"}


def cc_from_url(url: str) -> str | None:
    """``https://creativecommons.org/licenses/by-nc/3.0/de/`` -> ``cc-by-nc-3.0``; None for another URL."""
    m = _CC_URL.search(url)
    if not m:
        return None
    kind, code, version = m.group(1).lower(), m.group(2).lower(), m.group(3)
    if kind == "publicdomain":
        return "cc0-1.0" if code == "zero" else "public-domain" if code == "mark" else None
    return f"cc-{code}-{version}" if version else f"cc-{code}"


def _from_url(url: str) -> str | None:
    """A licence URL's licence: a Creative Commons deed, else the last path segment (``/licenses/MIT``,
    ``/licenses/LICENSE-2.0.txt``, ``/licenses/gpl-3.0.html``) read as a licence name."""
    found = cc_from_url(url)
    if found:
        return found
    segment = re.sub(r"\.(?:html?|txt|php)$", "", url.split("?")[0].split("#")[0].rstrip("/").rsplit("/", 1)[-1])
    if "apache.org" in url.lower() and segment.lower().startswith("license-"):
        segment = "apache-" + segment[len("license-"):]
    return _normalise(segment)


def normalise_license(value: str | None) -> str | None:
    """``'CC BY-SA 4.0'`` -> ``'cc-by-sa-4.0'``; None for a missing or placeholder licence."""
    if value is None:
        return None
    value = value.strip()
    return _from_url(value) if _URL.match(value) else _normalise(value)


def _normalise(value: str) -> str | None:
    s = value.strip().lower()
    for pattern, short in _TITLES:
        s = pattern.sub(short, s)
    s = _NOISE.sub(" ", s)
    s = re.sub(r"\b(non|share|no)[\s-]+(commercial|alike|deriv)", r"\1\2", s)
    s = re.sub(r"[\s_]+", "-", s.strip())
    s = re.sub(r"(?:^|-)(?:license|licence)$", "", s).strip("-")
    s = re.sub(r"^(?:the-)?(.*?)-(?:license|licence)-", r"\1-", s)
    s = re.sub(r"^creative-commons-", "cc-", s)
    if s.startswith("cc-"):
        s = "-".join(_CC_WORDS.get(w, w) for w in s.split("-"))
    s = re.sub(r"^(cc0)-v?1\.0(?:-cc0-1\.0)?$", r"\1", s)
    s = re.sub(r"^(cc(?:-by|-nc|-sa|-nd)*)-?v?(\d\.\d)$", r"\1-\2", s)
    s = re.sub(r"^(apache|gpl|lgpl|agpl|mpl|epl|gfdl)-?v?(\d(?:\.\d)?)((?:-only|-or-later)?)$", r"\1-\2\3", s)
    s = FOLDS.get(s, s)
    if re.fullmatch(r"(apache|gpl|lgpl|agpl|mpl|epl|gfdl)-\d(-only|-or-later)?", s):
        s = re.sub(r"-(\d)", r"-\1.0", s, count=1)
    return None if not s or s in PLACEHOLDERS else s
