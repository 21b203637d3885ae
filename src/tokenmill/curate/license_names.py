"""Licence names normalised to SPDX-like ids (``CC BY 4.0`` -> ``cc-by-4.0``): the one spelling the
``license`` step (:mod:`tokenmill.curate.license`) and licence detection
(:mod:`tokenmill.curate.license_detect`) compare.
"""

from __future__ import annotations

import re

PLACEHOLDERS = ("unknown", "none", "n/a", "na", "other", "null", "unspecified", "-")
FOLDS = {"cc0": "cc0-1.0", "cc-zero": "cc0-1.0", "pd": "public-domain", "public-domain-mark": "public-domain",
         "apache": "apache-2.0", "apache-2": "apache-2.0", "apache-v2": "apache-2.0", "apache-v2.0": "apache-2.0",
         "bsd-3": "bsd-3-clause", "bsd-2": "bsd-2-clause", "bsd": "bsd-3-clause", "gpl-3": "gpl-3.0",
         "gpl-2": "gpl-2.0", "gplv3": "gpl-3.0", "gplv2": "gpl-2.0", "mit-license": "mit"}


def normalise_license(value: str | None) -> str | None:
    """``'CC BY-SA 4.0'`` -> ``'cc-by-sa-4.0'``; None for a missing or placeholder licence."""
    if value is None:
        return None
    s = re.sub(r"[\s_]+", "-", value.strip().lower())
    s = re.sub(r"-?(?:license|licence)$", "", s).strip("-")
    s = re.sub(r"^(?:the-)?(.*?)-(?:license|licence)-", r"\1-", s)
    s = re.sub(r"^creative-commons-", "cc-", s)
    s = re.sub(r"^(cc(?:-by|-nc|-sa|-nd)*)-?v?(\d\.\d)$", r"\1-\2", s)
    s = re.sub(r"^(apache|gpl|lgpl|agpl|mpl)-?v?(\d(?:\.\d)?)$", r"\1-\2", s)
    s = FOLDS.get(s, s)
    if re.fullmatch(r"(apache|gpl|lgpl|agpl|mpl)-\d", s):
        s += ".0"
    return None if not s or s in PLACEHOLDERS else s
