"""``url``: remove documents by their URL — blocked hosts, blocked URLs, banned words, allow-lists.

Lists come from files (one entry per line, ``#`` comments and blank lines ignored, case-insensitive, a
leading ``www.`` ignored) or inline, plus a small default:

``domain_files`` / ``block_domains``   hosts whose pages go, **with their subdomains**, by exact label
    matching: ``example.com`` blocks ``example.com`` and ``a.b.example.com``, never ``notexample.com``
    or ``example.com.au``.
``url_files``        whole URLs (without scheme and ``www.``, as UT1 writes them: ``host/path``).
``ut1`` + ``categories``   a UT1 blacklist directory: ``<ut1>/<category>_domains.txt`` and
    ``<ut1>/<category>_urls.txt`` (or UT1's own tree, ``<ut1>/<category>/domains`` and ``urls``).
``banned_word_files`` / ``banned_words``   words that remove a document when they are a whole token of
    its URL (tokens split on anything but letters and digits: ``sex`` matches ``/sex-shop`` but not
    ``sussex.ac.uk``).
``banned_subword_files`` / ``banned_subwords``   strings that remove a document anywhere in the URL.
``soft_word_files`` / ``soft_words``   tokens counted; ``soft_threshold`` (default 2) or more remove it.
``allow_files`` / ``allow_domains``    hosts (and subdomains) never removed by this step.
``default``  (true) adds :data:`DEFAULT_BANNED_WORDS`, a short list of unambiguous adult-content words.

Statistics: ``url.status`` (``ok``, ``missing`` for a null or empty URL, ``invalid`` for one with no
usable host: garbage never raises), ``url.host``, ``url.category`` (the list that blocked the host or URL:
``domains``, ``urls``, ``ut1:<category>``; null when none), ``url.allowed``, ``url.banned_words``,
``url.banned_subwords``, ``url.soft_words``. Rules, first match wins: ``invalid_url`` / ``missing_url``
(only when ``invalid`` / ``missing`` is ``remove``; both default to ``keep``), ``blocked_domain``,
``blocked_url``, ``banned_word``, ``banned_subword``, ``soft_banned_words``; an allowed host is kept
whatever its URL holds.

Everything is vectorised over the batch (Arrow regular expressions, ``index_in`` against the lists,
one lookup per host label level).

:func:`absolute_url` and :func:`host_key` are the one reading of a document's URL and host that the
consent steps (``robots``, ``tdm_optout``) share: a URL without a scheme is taken as the crawl fetched it,
and a host is compared in its ASCII (punycode) form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import SplitResult, urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.steps.contract import Scored

DEFAULT_BANNED_WORDS = ("porn", "porno", "pornhub", "xxx", "xvideos", "xnxx", "hentai", "nsfw", "camgirl",
                        "camgirls", "redtube", "youporn")
_SPLIT = re.compile(r"^(?:[a-z][a-z0-9+.\-]*:)?//")
URL_RE = (r"^(?:[a-z][a-z0-9+.\-]*://)?(?:[^@/?#\s]*@)?(?:www\.)?(?P<host>[^:/?#\s@]+?)\.?"
          r"(?::[0-9]*)?(?P<rest>[/?#][^\s]*)?$")
_LABEL = r"[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?"
HOST_RE = rf"^(?:{_LABEL}\.)+\p{{L}}(?:[\p{{L}}\p{{N}}-]*[\p{{L}}\p{{N}}])?$|^\d{{1,3}}(?:\.\d{{1,3}}){{3}}$"
POLICIES = ("keep", "remove")
_HAS_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*://", re.IGNORECASE)
_OTHER_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*:(?![0-9])", re.IGNORECASE)  # mailto:, javascript: (not host:port)
_PY_LABEL = r"[^\W_](?:[\w-]*[^\W_])?"
_PY_HOST = re.compile(rf"^(?:{_PY_LABEL}\.)+{_PY_LABEL}$|^localhost$|^[0-9a-f]*:[0-9a-f:.]*$")  # a name, IPv4, IPv6


def absolute_url(url: str | None) -> SplitResult | None:
    """``url`` split into its parts, with a scheme; None when it names no host.

    A URL without a scheme (Dolma's ``metadata.url``, Common Crawl index exports: ``example.com/page``, or
    ``//example.com/page``) is read as ``https://`` + it, the scheme crawlers try first; the host and path,
    which is all a robots.txt or tdmrep.json rule reads, are the same under ``http``. ``mailto:``,
    ``javascript:`` and other non-web schemes, and strings whose host is not a host name (one word, spaces,
    empty labels, a bad port), name no host.
    """
    s = (url or "").strip()
    if not s:
        return None
    if s.startswith("//"):
        s = "https:" + s
    elif not _HAS_SCHEME.match(s):
        if _OTHER_SCHEME.match(s):
            return None
        s = "https://" + s
    try:
        parts = urlsplit(s)
        host, _ = parts.hostname, parts.port  # .port raises on a port that is not a number
    except ValueError:
        return None
    return parts if host and _PY_HOST.match(host.rstrip(".")) else None


def host_key(host: str | None) -> str:
    """A host name as snapshots and lists are keyed: lowercase, no trailing dot, internationalised names in
    their ASCII form (``bücher.example`` -> ``xn--bcher-kva.example``, the name DNS and crawlers use), so a
    page's host and a snapshot's file name match whichever of the two forms each was written in."""
    h = (host or "").strip().rstrip(".").lower()
    if h.isascii():
        return h
    try:
        return h.encode("idna").decode("ascii")
    except UnicodeError:  # a label IDNA refuses (too long, forbidden characters): compared as written
        return h


def read_list(path: str | Path) -> list[str]:
    """Entries of a list file: stripped, lowercased, without comments, blank lines or a ``www.`` prefix."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            entry = line.split("#", 1)[0].strip().lower()
            if entry:
                out.append(entry.removeprefix("www."))
    return out


def _ut1_files(root: str, category: str) -> list[tuple[str, Path]]:
    base = Path(root)
    found = []
    for kind in ("domains", "urls"):
        for p in (base / f"{category}_{kind}.txt", base / category / kind):
            if p.is_file():
                found.append((kind, p))
                break
    return found


def _strings(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: expected a list of strings, got {value!r}")
    return list(value)


@dataclass(frozen=True)
class UrlFilter:
    domain_files: Any = ()
    block_domains: Any = ()
    url_files: Any = ()
    ut1: str | None = None
    categories: Any = ()
    banned_word_files: Any = ()
    banned_words: Any = ()
    banned_subword_files: Any = ()
    banned_subwords: Any = ()
    soft_word_files: Any = ()
    soft_words: Any = ()
    soft_threshold: int = 2
    allow_files: Any = ()
    allow_domains: Any = ()
    default: bool = True
    invalid: str = "keep"
    missing: str = "keep"
    _lists: Any = field(default=None, init=False, repr=False, compare=False)

    name: ClassVar[str] = "url"
    version: ClassVar[int] = 1
    decision_params: ClassVar[tuple] = ("soft_threshold", "invalid", "missing")
    thresholds: ClassVar[dict] = {"soft_words": "soft_threshold"}

    def __post_init__(self) -> None:
        for key in ("domain_files", "block_domains", "url_files", "categories", "banned_word_files",
                    "banned_words", "banned_subword_files", "banned_subwords", "soft_word_files", "soft_words",
                    "allow_files", "allow_domains"):
            object.__setattr__(self, key, _strings(getattr(self, key), key))
        for key in ("domain_files", "url_files", "banned_word_files", "banned_subword_files", "soft_word_files",
                    "allow_files"):
            for path in getattr(self, key):
                if not Path(path).is_file():
                    raise ValueError(f"{key}: no file {path!r}")
        ut1 = self.ut1 or ""
        if self.categories and not ut1:
            raise ValueError("categories: give the UT1 directory as 'ut1' too")
        for cat in self.categories:
            if not _ut1_files(ut1, cat):
                raise ValueError(f"categories: no {cat}_domains.txt or {cat}_urls.txt (nor {cat}/domains) in {self.ut1!r}")
        for key in ("invalid", "missing"):
            if getattr(self, key) not in POLICIES:
                raise ValueError(f"{key}: expected keep or remove, got {getattr(self, key)!r}")
        if isinstance(self.soft_threshold, bool) or not isinstance(self.soft_threshold, int) or self.soft_threshold < 1:
            raise ValueError(f"soft_threshold: expected a whole number >= 1, got {self.soft_threshold!r}")

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_lists": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def setup(self) -> None:
        if self._lists is None:
            object.__setattr__(self, "_lists", _Lists.load(self))

    def score(self, batch: pa.RecordBatch) -> Scored:
        self.setup()
        lists: _Lists = self._lists
        url = pc.utf8_lower(pc.utf8_trim_whitespace(pc.cast(batch.column("url"), pa.string())))
        parts = pc.extract_regex(pc.fill_null(url, ""), URL_RE)
        host, rest = pc.struct_field(parts, "host"), pc.struct_field(parts, "rest")
        good = pc.fill_null(pc.match_substring_regex(host, HOST_RE), False)
        missing = pc.fill_null(pc.equal(pc.utf8_length(url), 0), True)
        status = pc.if_else(missing, "missing", pc.if_else(good, "ok", "invalid"))
        host = pc.if_else(good, host, pa.scalar(None, pa.string()))
        path = pc.binary_join_element_wise(host, pc.fill_null(rest, ""), "")
        category = pc.coalesce(_host_lookup(host, lists.domains, lists.domain_cats),
                               _url_lookup(path, lists.urls, lists.url_cats))
        allowed = pc.fill_null(pc.is_valid(_host_lookup(host, lists.allow, lists.allow_cats)), False)
        tokens = pc.split_pattern_regex(pc.fill_null(url, ""), r"[^\p{L}\p{N}]+")
        scores = {
            "status": status, "host": host, "category": category, "allowed": allowed,
            "blocked_domain": pc.is_valid(_host_lookup(host, lists.domains, lists.domain_cats)),
            "banned_words": _token_counts(tokens, lists.words),
            "banned_subwords": _substring_counts(pc.fill_null(url, ""), lists.subwords),
            "soft_words": _token_counts(tokens, lists.soft),
        }
        return Scored(scores)

    def decide(self, scores: Mapping[str, np.ndarray]) -> np.ndarray:
        n = len(scores["status"])
        out = np.full(n, None, dtype=object)
        status = scores["status"].astype(object)
        rules = [
            (scores["soft_words"] >= self.soft_threshold, "soft_banned_words"),
            (scores["banned_subwords"] > 0, "banned_subword"),
            (scores["banned_words"] > 0, "banned_word"),
            (np.array([c is not None for c in scores["category"]], dtype=bool)
             & ~scores["blocked_domain"].astype(bool), "blocked_url"),
            (scores["blocked_domain"].astype(bool), "blocked_domain"),
        ]
        for mask, rule in rules:  # last assignment wins: listed from the last rule to the first
            out[np.asarray(mask, dtype=bool)] = rule
        out[scores["allowed"].astype(bool)] = None
        if self.missing == "remove":
            out[status == "missing"] = "missing_url"
        if self.invalid == "remove":
            out[status == "invalid"] = "invalid_url"
        return out


@dataclass
class _Lists:
    domains: pa.Array
    domain_cats: pa.Array
    urls: pa.Array
    url_cats: pa.Array
    allow: pa.Array
    allow_cats: pa.Array
    words: pa.Array
    soft: pa.Array
    subwords: str | None  # one alternation for the regex engine, or None

    @classmethod
    def load(cls, step: UrlFilter) -> _Lists:
        domains: dict[str, str] = {}
        urls: dict[str, str] = {}
        for d in step.block_domains:
            domains.setdefault(_clean(d), "domains")
        for path in step.domain_files:
            for d in read_list(path):
                domains.setdefault(d, "domains")
        for path in step.url_files:
            for u in read_list(path):
                urls.setdefault(_SPLIT.sub("", u).rstrip("/"), "urls")
        for cat in step.categories:
            for kind, path in _ut1_files(step.ut1 or "", cat):  # given with categories (checked by Url)
                target = domains if kind == "domains" else urls
                for entry in read_list(path):
                    target.setdefault(entry.rstrip("/") if kind == "urls" else entry, f"ut1:{cat}")
        allow = {_clean(d): "allow" for d in step.allow_domains}
        for path in step.allow_files:
            allow.update({d: "allow" for d in read_list(path)})
        words = set(step.banned_words) | (set(DEFAULT_BANNED_WORDS) if step.default else set())
        words |= {w for p in step.banned_word_files for w in read_list(p)}
        soft = set(step.soft_words) | {w for p in step.soft_word_files for w in read_list(p)}
        subs = set(step.banned_subwords) | {w for p in step.banned_subword_files for w in read_list(p)}
        alternation = "|".join(re.escape(s.lower()) for s in sorted(subs) if s) or None
        return cls(*_keys_values(domains), *_keys_values(urls), *_keys_values(allow),
                   pa.array(sorted(w.lower() for w in words), pa.string()),
                   pa.array(sorted(w.lower() for w in soft), pa.string()), alternation)


def _clean(host: str) -> str:
    h = host.strip().lower()
    return h.removeprefix("www.")


def _keys_values(d: dict[str, str]) -> tuple[pa.Array, pa.Array]:
    keys = sorted(d)
    return pa.array(keys, pa.string()), pa.array([d[k] for k in keys], pa.string())


def _host_lookup(host: pa.Array, keys: pa.Array, values: pa.Array) -> pa.Array:
    """For each host, the value of the first of host, its parent, its grandparent, ... found in ``keys``."""
    found = pa.nulls(len(host), pa.string())
    if len(keys) == 0:
        return found
    current = host
    while pc.any(pc.is_valid(current)).as_py():
        hit = pc.take(values, pc.index_in(current, value_set=keys))
        found = pc.coalesce(found, hit)
        has_dot = pc.fill_null(pc.match_substring(current, "."), False)
        parent = pc.replace_substring_regex(current, r"^[^.]*\.", "")
        current = pc.if_else(has_dot, parent, pa.scalar(None, pa.string()))
    return found


def _url_lookup(path: pa.Array, keys: pa.Array, values: pa.Array) -> pa.Array:
    if len(keys) == 0:
        return pa.nulls(len(path), pa.string())
    trimmed = pc.replace_substring_regex(path, r"/+$", "")
    return pc.take(values, pc.index_in(trimmed, value_set=keys))


def _token_counts(tokens: pa.Array, words: pa.Array) -> np.ndarray:
    n = len(tokens)
    if len(words) == 0 or n == 0:
        return np.zeros(n, dtype=np.int64)
    flat = pc.list_flatten(tokens)
    hits = np.asarray(pc.fill_null(pc.is_in(flat, value_set=words), False))
    parents = np.asarray(pc.list_parent_indices(tokens))
    return np.bincount(parents[hits], minlength=n).astype(np.int64)


def _substring_counts(url: pa.Array, alternation: str | None) -> np.ndarray:
    if alternation is None:
        return np.zeros(len(url), dtype=np.int64)
    return np.asarray(pc.count_substring_regex(url, alternation), dtype=np.int64)
