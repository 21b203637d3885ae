"""Explicit schema mappings checked before any work: shape, keys, and every named field against the input.

A mapping (``schema:`` in the pipeline file, ``schemas=`` in the API) is keyed by an input's path relative
to its root, or ``"*"``. Each one is checked against every input it applies to, using the fields the
router saw in that input's sample (:func:`field_keys`): a misspelled column would otherwise turn every
record into a ``missing_field`` reject, and a bad conversation mapping would fail inside a worker after
the output directory exists. :func:`mapping_problems` returns every problem at once, each naming the
mapping key, the input and the fields it does have.
"""

from __future__ import annotations

import difflib
from typing import Any

from tokenmill.errors import ConfigError, RoutingError
from tokenmill.route.spec import COLUMN_KEYS, EXTRA_KEYS, TURN_KEYS, parse_schema

DOCUMENT_KEYS = ("record", "text", "id", "url", "license", "source", "meta", "meta_json")
# keys the router writes for information (a copied `inspect --json` schema carries them)
INFO_KEYS = ("roles", "content_parts", "markers", "columns", "style")
MAX_SUBKEYS = 64


def field_keys(rows: list[dict]) -> dict[str, list[str]]:
    """Top-level fields of sampled rows -> the keys one level down (of dict values, or of the dicts in
    list values such as turns), sorted; fields in first-seen order."""
    found: dict[str, set[str]] = {}
    for row in rows:
        for name, value in row.items() if isinstance(row, dict) else ():
            keys = found.setdefault(str(name), set())
            items = value if isinstance(value, list) else [value]
            for item in items[:8]:
                if isinstance(item, dict) and len(keys) < MAX_SUBKEYS:
                    keys.update(str(k) for k in item)
    return {name: sorted(keys) for name, keys in found.items()}


def check_mappings(track: str, files: list, routes: list, given: dict | None) -> None:
    """Raise :class:`ConfigError` listing every problem of the explicit mappings ``given``."""
    problems = mapping_problems(track, files, routes, given)
    if problems:
        raise ConfigError(problems)


def mapping_problems(track: str, files: list, routes: list, given: dict | None) -> list[str]:
    """Every problem of the explicit mappings for these inputs (``files`` and their ``routes``, in order)."""
    given = given or {}
    if not isinstance(given, dict):
        return [f"schema: expected a mapping of input path (or '*') to a field mapping, got {type(given).__name__}"]
    rels = [f.rel for f in files]
    problems = [f"schema[{key!r}]: matches no input; inputs are: {', '.join(rels) or 'none'}"
                for key in given if key != "*" and key not in rels]
    for key, mapping in given.items():
        where = f"schema[{key!r}]"
        shape = _shape_problems(track, mapping)
        problems += [f"{where}: {p}" for p in shape]
        if shape:
            continue
        for f, route in zip(files, routes):
            if key == f.rel or (key == "*" and f.rel not in given):
                problems += [f"{where} for {f.rel}: {p}" for p in _field_problems(track, mapping, route)]
    return problems


def _shape_problems(track: str, mapping: Any) -> list[str]:
    if not isinstance(mapping, dict):
        return [f"expected a field mapping (a dict), got {type(mapping).__name__}"]
    if track == "pretrain":
        return _document_problems(mapping)
    if track == "preference":
        return _preference_problems(mapping)

    problems = _unknown_keys(mapping, _conversation_keys())
    try:
        parse_schema(mapping)
    except ConfigError as exc:
        problems += exc.problems
    except RoutingError as exc:
        problems.append(str(exc))
    return problems


def _document_problems(mapping: dict) -> list[str]:
    problems = _unknown_keys(mapping, DOCUMENT_KEYS)
    if mapping.get("record", "Document") != "Document":
        problems.append(f"record {mapping['record']!r} is not for the pretrain track, which reads 'Document' "
                        "records (conversations go to `tokenmill sft`)")
    if "text" in mapping and not isinstance(mapping["text"], str):
        problems.append(f"'text' must name a column (a string), got {mapping['text']!r}")
    for key in ("id", "url", "license", "source", "meta_json"):
        if mapping.get(key) is not None and not isinstance(mapping[key], str):
            problems.append(f"{key!r} must name a column (a string) or be null, got {mapping[key]!r}")
    meta = mapping.get("meta")
    if meta is not None and not (isinstance(meta, list) and all(isinstance(m, str) for m in meta)):
        problems.append(f"'meta' must be a list of column names, got {meta!r}")
    return problems


PREFERENCE_KEYS = ("record", "style", "prompt", "chosen", "rejected", "messages", "label", "system", "tools", "id",
                   "meta", "columns")


def _preference_problems(mapping: dict) -> list[str]:
    """A `tokenmill pref` mapping: ``chosen`` and ``rejected`` (``prompt`` optional), or KTO's ``style: kto`` with
    ``prompt``/``chosen`` (the completion) or ``messages``, and ``label``."""
    problems = _unknown_keys(mapping, PREFERENCE_KEYS)
    kto = mapping.get("style") == "kto"
    needed = ("label",) if kto else ("chosen", "rejected")
    problems += [f"{k!r} must name a column (a string); a {'KTO' if kto else 'preference'} mapping needs "
                 f"{' and '.join(needed)}" for k in needed if not isinstance(mapping.get(k), str)]
    problems += [f"{k!r} must name a column (a string) or be null, got {mapping[k]!r}"
                 for k in ("prompt", "messages", "system", "tools", "id") if mapping.get(k) is not None
                 and not isinstance(mapping[k], str)]
    return problems


def _conversation_keys() -> tuple[str, ...]:

    spellings = {name for keys in COLUMN_KEYS.values() for _, names, _ in keys for name in names}
    turn = ("role_key", "content_key", "reasoning_key", "weight_key")
    return ("record", "style", "text", "meta", *sorted(spellings), *EXTRA_KEYS, *turn)


def _unknown_keys(mapping: dict, known: tuple[str, ...]) -> list[str]:
    allowed = set(known) | set(INFO_KEYS)
    return [f"unknown key {k!r}{_hint(str(k), known)}; known keys: {', '.join(known)}"
            for k in mapping if k not in allowed]


def _hint(name: str, choices) -> str:
    near = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _field_problems(track: str, mapping: dict, route: Any) -> list[str]:
    """Named fields the input's sample does not have (nothing to check when the sample is empty)."""
    fields = getattr(route, "fields", None) or {}
    if not fields:
        return []
    problems = [_missing(key, path, fields) for key, path in _named_fields(track, mapping)]
    if track == "sft" and mapping.get("style") in ("sharegpt", "messages"):
        problems += _turn_key_problems(mapping, fields)
    return [p for p in problems if p]


def _named_fields(track: str, mapping: dict) -> list[tuple[str, str]]:
    """(mapping key, field path) of every field the mapping names."""
    if track == "pretrain":
        named = [("text", mapping.get("text") or "text")]
        named += [(k, mapping[k]) for k in ("id", "url", "license", "source", "meta_json") if mapping.get(k)]
    else:
        skip = {"record", "style", "meta", "role_key", "content_key", "reasoning_key", "weight_key", *INFO_KEYS}
        named = [(k, v) for k, v in mapping.items() if k not in skip and isinstance(v, str)]
    return named + [("meta", m) for m in mapping.get("meta") or []]


def _missing(key: str, path: str, fields: dict[str, list[str]]) -> str | None:
    """The problem of one named field path, checked as deep as the sample's keys go (two levels: a path
    such as ``doc.content.text`` is checked to ``doc.content``; the reader resolves the rest per record)."""
    root, _, rest = path.partition(".")
    sub = rest.partition(".")[0]
    seen = ", ".join(fields)
    if path in fields:
        return None
    if root not in fields:
        return f"{key!r} names field {path!r}, which the input does not have{_hint(path, fields)}; its fields: {seen}"
    if sub and fields[root] and sub not in fields[root]:
        return (f"{key!r} names {path!r}, but {root!r} holds no key {sub!r}{_hint(sub, fields[root])}; "
                f"its keys: {', '.join(fields[root])}")
    return None


def _turn_key_problems(mapping: dict, fields: dict[str, list[str]]) -> list[str]:

    turns = fields.get(mapping.get("messages") or "", [])
    if not turns:
        return []
    role, content = TURN_KEYS[mapping["style"]]
    problems = []
    for key, default in (("role_key", role), ("content_key", content), ("reasoning_key", None), ("weight_key", None)):
        name = mapping.get(key) or default
        if isinstance(name, str) and name not in turns:
            problems.append(f"{key} {name!r} is not a key of the turns in {mapping['messages']!r}"
                            f"{_hint(name, turns)}; their keys: {', '.join(turns)}")
    return problems
