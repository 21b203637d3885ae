"""``tokenmill audit``: verify a shard directory and show decoded examples with the trained spans marked.

The audit reads every byte (``verify_shards``), scans the loss masks for silent failures (SFT examples with no
trained token give a loss of 0; a trained span that does not end in a stop token teaches the model never to
stop), checks that the tokenizer's fingerprint equals the shards', and decodes ``n`` documents spread evenly
over the set, one decode per contiguous run of trained or untrained tokens.

In the examples a control token (one id, e.g. the template's ``<|im_end|>``) is shown as is, and a control
string that is only text (several ordinary ids a user typed, e.g. ``<|im_end|>`` inside a message) is shown as
``{text:<|im_end|>}``; each example counts both. A set of SFT shards in which no example trains a stop token
is a problem (exit code 1): a model trained on it never learns to end its turn.
"""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from tokenmill.engine.store import readable
from tokenmill.errors import ConfigError, ShardError, TokenmillError
from tokenmill.shards.inventory import val_directory
from tokenmill.shards.pairs_audit import pair_examples, prompt_documents, render_pairs
from tokenmill.shards.pick import Pick, choose, sources_of
from tokenmill.shards.reader import ShardSet, is_unfinished, open_shards, unfinished_message
from tokenmill.shards.verify import verify_shards
from tokenmill.tokenize import load_tokenizer, sources

OPEN, CLOSE = "[[", "]]"  # plain-text markers around trained spans
LITERAL_OPEN, LITERAL_CLOSE = "{text:", "}"  # plain-text markers around a control string that is only text
_GREEN, _DIM, _RESET = "\x1b[32m", "\x1b[2m", "\x1b[0m"
_UNDERLINE, _NO_UNDERLINE = "\x1b[4m", "\x1b[24m"
_SCAN_TOKENS = 1 << 24  # tokens of mask scanned at a time
_LISTED = 10  # document indices listed per warning
_HEADER_KEYS = ("tokenizer", "tokenizer_fingerprint", "vocab_size", "bos_id", "eos_id", "pad_id",
                "chat_template_hash", "dtype")  # fmt: skip


def audit(directory: str | os.PathLike, *, n: int = 3, tokenizer=None, max_example_tokens: int = 2048,
          pick: Pick | None = None) -> dict:
    """Problems, counts, mask warnings and ``n`` decoded examples of the shards in ``directory``.

    ``pick``: show only documents of these sources, ids or mask shape (:mod:`tokenmill.shards.pick`); the
    examples are then spread over the documents that match.

    ``tokenizer``: a spec for ``load_tokenizer`` (or None: the one named in the shard headers). A tokenizer
    that cannot be loaded is reported under ``decoder.error``; decoding is then skipped. Examples show at
    most ``max_example_tokens`` tokens each. An ``s3://`` run is audited in its local copy
    (:func:`tokenmill.engine.store.local_copy`).
    """

    shown, directory = str(directory), readable(directory)
    result = {"directory": shown, "shards": 0, "documents": 0, "tokens": 0, "trained_tokens": 0,
              "supervised_share": 0.0, "has_mask": None, "tokenizer": {}, "decoder": {},
              "fingerprint_match": None, "problems": verify_shards(directory), "warnings": [],
              "fully_masked": None, "stop_untrained": None, "stop_trained_docs": None,
              "examples": []}  # fmt: skip
    partial = directory.is_dir() and is_unfinished(directory)
    if partial:  # said first; what the finished units wrote is still audited below
        result["problems"].append(unfinished_message(directory).replace("pass allow_partial=True to read",
                                                                       "open it with allow_partial=True to read"))
    try:
        shards = open_shards(directory, allow_partial=partial)
    except ShardError as exc:
        if not any(p in str(exc) for p in result["problems"]):  # not a repeat of what verify listed
            result["problems"].append(str(exc))
        return result
    result.update(_counts(shards))
    tok = _decoder(shards, tokenizer, result)
    try:
        pairs = (shards.manifest or {}).get("track") == "pref"  # pairs side by side, not documents
        if pick and pairs:
            raise ConfigError("--source, --id and --shape pick documents; a preference output is audited by "
                              "pair: leave them out")
        stop_ids = _stop_ids(shards, tok)
        result.update(_mask_scan(shards, stop_ids, untrained=prompt_documents(shards) if pairs else None))
        picks = _spread(len(shards), n)
        if pick:
            picks, result["picked"] = _picked(shards, pick, n, stop_ids)
        if pairs:
            result["pairs"] = pair_examples(shards, tok, n, max_example_tokens, _example)
        else:
            result["examples"] = [_example(shards, i, tok, max_example_tokens) for i in picks]
    except (OSError, ValueError, IndexError) as exc:  # corrupt offsets or records, already listed as problems
        result["problems"].append(f"could not read the documents: {type(exc).__name__}: {exc}")
    result["warnings"] += _mask_warnings(result)
    result["problems"] += _stop_problem(result)
    _audit_val(directory, result, tokenizer)
    return result


def _picked(shards: ShardSet, pick: Pick, n: int, stop_ids: np.ndarray | None) -> tuple[list[int], dict]:
    picks, matched = choose(shards, pick, n, stop_ids)
    picked = {"by": pick.describe(), "matching": matched}
    if not matched:
        picked["sources"] = sources_of(shards)
    return picks, picked


def _audit_val(directory: str | os.PathLike, result: dict, tokenizer) -> None:
    """A run made with a validation split: audit ``val/`` too; its problems count, prefixed ``val/``."""
    val = val_directory(Path(directory))
    if val is None:
        return
    if not (val / "manifest.json").is_file():
        result["problems"].append(f"{val}: the run's manifest names a validation split, but its directory or "
                                  "manifest is missing; rewrite the output")
        return
    sub = audit(val, n=0, tokenizer=tokenizer)
    if not sub["documents"] and all("no tokenmill shard headers" in p for p in sub["problems"]):
        sub["problems"] = []  # an empty validation split (a tiny --val-fraction) is not a fault
    found = (sub.get("tokenizer") or {}).get("tokenizer_fingerprint")
    if found and found != (result.get("tokenizer") or {}).get("tokenizer_fingerprint"):
        sub["problems"].append(f"the validation shards' tokenizer fingerprint {found} differs from the training shards'")
    result["val"] = {k: sub[k] for k in ("directory", "shards", "documents", "tokens", "trained_tokens", "problems",
                                         "warnings")}
    result["problems"] += [f"val/: {p}" for p in sub["problems"]]
    result["warnings"] += [f"val/: {w}" for w in sub["warnings"]]


def _stop_problem(result: dict) -> list[str]:
    trained_docs = result["documents"] - (result.get("fully_masked") or {}).get("count", 0)
    if not result["has_mask"] or result.get("stop_trained_docs") != 0 or trained_docs <= 0:
        return []
    return ["no example trains a stop token (EOS or a control token such as <|im_end|>): a model trained on "
            "these shards never learns to end its turn. Check that the chat template's end-of-turn string is a "
            "special token of the tokenizer (tokenmill sft refuses such a template unless "
            "--allow-untrained-stop is given) and that truncation keeps the final stop"]


def _counts(shards: ShardSet) -> dict:
    trained = shards.n_trained_tokens if shards.has_mask else shards.n_tokens
    return {
        "shards": len(shards.shards), "documents": shards.n_docs, "tokens": shards.n_tokens,
        "trained_tokens": int(trained), "supervised_share": trained / shards.n_tokens if shards.n_tokens else 0.0,
        "has_mask": bool(shards.has_mask), "track": "sft" if shards.has_mask else "pretrain",
        "tokenizer": {key: shards.header.get(key) for key in _HEADER_KEYS},
    }  # fmt: skip


def _decoder(shards: ShardSet, spec, result: dict):
    """The tokenizer to decode with, or None; fills ``decoder`` and ``fingerprint_match`` in ``result``."""

    name = shards.tokenizer_name
    result["decoder"] = {"from": "argument" if spec is not None else "shard header"}
    if spec is None:
        spec, why_not = recorded_tokenizer(shards.header.get("tokenizer_info") or {}, name)
        if spec is None:
            result["decoder"].update(spec=name, error=why_not)
            return None
    result["decoder"]["spec"] = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else repr(spec)
    try:
        tok = load_tokenizer(spec, fast=False)
    except (TokenmillError, OSError) as exc:
        result["decoder"]["error"] = f"{exc}; decoding skipped (pass --tokenizer with the tokenizer's files)"
        return None
    result["decoder"].update(name=tok.name, fingerprint=tok.fingerprint)
    result["fingerprint_match"] = tok.fingerprint == shards.fingerprint
    if result["fingerprint_match"]:
        return tok
    result["problems"].append(
        f"tokenizer {spec!r} has fingerprint {tok.fingerprint}, but the shards were written with "
        f"{name!r} (fingerprint {shards.fingerprint}): its ids mean other text; decoding skipped. "
        "Use the tokenizer the shards were made with, or re-tokenize the data")
    return None


def recorded_tokenizer(info: dict, name: str) -> tuple[str | None, str]:
    """(spec to load, "") for the tokenizer the shards record, or (None, why not).

    The recorded local path comes first (a hub snapshot's too); the network is tried only for a tokenizer
    that came from the Hub and is no longer on disk, or for old shards naming an ``org/name`` hub id.
    """

    path, origin = info.get("path"), info.get("origin")
    if path and os.path.exists(path):
        return path, ""
    if origin == "embedded" or name in ("default", "cl100k_im") or name in sources.tk.encoding_names():
        return name, ""
    if origin == "hub" or (origin is None and name and (name.count("/") == 1 or sources.looks_local(name))):
        return name, ""  # a hub id, or (old shards) a path: either loads or says why, a path never online
    where = f"was read from {path}, which no longer exists" if path else "was not read from a recorded path"
    return None, (f"the shards' tokenizer {name!r} {where}; pass --tokenizer with its directory or file "
                  "(nothing is looked up on the network for a local tokenizer)")


def _stop_ids(shards: ShardSet, tok) -> np.ndarray | None:
    """Ids a trained span may end with: EOS and the tokenizer's control tokens; None without a tokenizer."""
    if not shards.has_mask or tok is None:
        return None
    ids = {*tok.special_tokens.values(), shards.eos_id}
    return np.array(sorted(i for i in ids if i is not None), dtype=np.int64)


def _mask_scan(shards: ShardSet, stop_ids: np.ndarray | None, *, untrained: np.ndarray | None = None) -> dict:
    """Documents with tokens but no trained token, and documents with a trained span not ending in a stop id;
    ``untrained``: a flag per document that is untrained by design (a preference pair's prompt)."""
    if not shards.has_mask:
        return {"fully_masked": {"count": 0, "first": []}}
    fully, no_stop, stopped, base = [], [], 0, 0
    for shard in shards.shards:
        offsets = np.asarray(shard.offsets, dtype=np.int64)
        for d0, d1 in _doc_chunks(offsets):
            lo, hi = int(offsets[d0]), int(offsets[d1])
            starts, ends = offsets[d0:d1] - lo, offsets[d0 + 1 : d1 + 1] - lo
            mask = shard.mask_slice(lo, hi)
            empty = _trained_per_doc(mask, starts, ends) == 0
            if untrained is not None:
                empty &= ~untrained[base + d0:base + d1]
            fully.append(base + d0 + np.flatnonzero(empty & (ends > starts)))
            if stop_ids is not None:
                ids = np.asarray(shard.ids[lo:hi])
                no_stop.append(base + d0 + _unstopped_docs(mask, ids, ends, stop_ids))
                stopped += _stopped_docs(mask, ids, ends, stop_ids)
        base += shard.n_docs
    result: dict[str, Any] = {"fully_masked": _listing(fully)}
    if stop_ids is not None:
        result["stop_untrained"] = _listing(no_stop)
        result["stop_trained_docs"] = stopped
    return result


def _stopped_docs(mask: np.ndarray, ids: np.ndarray, ends: np.ndarray, stop_ids: np.ndarray) -> int:
    """How many documents train at least one stop id."""
    positions = np.flatnonzero(mask & np.isin(ids, stop_ids))
    return len(np.unique(np.searchsorted(ends, positions, side="right")))


def _doc_chunks(offsets: np.ndarray):
    """(first, stop) document ranges of about ``_SCAN_TOKENS`` tokens, at least one document each."""
    d0, n = 0, len(offsets) - 1
    while d0 < n:
        d1 = int(np.searchsorted(offsets, offsets[d0] + _SCAN_TOKENS, side="right")) - 1
        d1 = min(max(d1, d0 + 1), n)
        yield d0, d1
        d0 = d1


def _trained_per_doc(mask: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    trained = np.zeros(len(starts), dtype=np.int64)
    filled = ends > starts
    if filled.any():
        trained[filled] = np.add.reduceat(mask.view(np.uint8), starts[filled], dtype=np.int64)
    return trained


def _unstopped_docs(mask: np.ndarray, ids: np.ndarray, ends: np.ndarray, stop_ids: np.ndarray) -> np.ndarray:
    """Local indices of documents holding a trained run whose last token is not a stop id."""
    run_end = mask & ~np.append(mask[1:], False)
    last = ends[ends > 0] - 1
    run_end[last] = mask[last]  # a run also ends where its document ends
    positions = np.flatnonzero(run_end)
    bad = positions[~np.isin(ids[positions], stop_ids)]
    return np.unique(np.searchsorted(ends, bad, side="right"))


def _listing(parts: list[np.ndarray]) -> dict:
    docs = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return {"count": len(docs), "first": docs[:_LISTED].tolist()}


def _mask_warnings(result: dict) -> list[str]:
    warnings = []
    fully, no_stop = result.get("fully_masked") or {}, result.get("stop_untrained") or {}
    if fully.get("count"):
        warnings.append(f"{_plural(fully['count'], 'example')} with no trained token: they add 0 to the loss "
                        f"(first: {fully['first']}); check the chat template's assistant spans")
    if no_stop.get("count"):
        warnings.append(f"{_plural(no_stop['count'], 'example')} with a trained span that does not end in a stop token "
                        f"(EOS or a control token such as <|im_end|>): the model does not learn to stop "
                        f"there (first: {no_stop['first']}); check truncation and the template's stop marker")
    if result["decoder"].get("error"):
        warnings.append(f"tokenizer {result['decoder']['spec']!r} not loaded: {result['decoder']['error']}")
    return warnings


def _spread(n_docs: int, n: int) -> list[int]:
    """``n`` document indices spread evenly from the first to the last (all of them when n >= n_docs)."""
    if n <= 0 or n_docs == 0:
        return []
    return sorted({int(i) for i in np.linspace(0, n_docs - 1, min(n, n_docs)).round()})


def _example(shards: ShardSet, i: int, tok, limit: int) -> dict:
    doc = shards[i]
    ids = np.asarray(doc["input_ids"], dtype=np.int64)
    flags = np.ones(len(ids), bool) if doc["loss_mask"] is None else np.asarray(doc["loss_mask"], bool)
    example = {"index": i, "id": doc["id"], "source": doc["source"], "tokens": len(ids),
               "trained": int(flags.sum()), "shown_tokens": min(len(ids), limit), "segments": []}  # fmt: skip
    if tok is not None:
        shown, marks = ids[:limit], flags[:limit]
        example["segments"] = [_segment(tok, shown[a:b], t) for a, b, t in _runs(marks)]
        example["control_tokens"] = {kind: sum(1 for s in example["segments"] for k, _ in s["pieces"] if k == kind)
                                     for kind in ("real", "literal")}
    return example


def _segment(tok, ids: np.ndarray, trained: bool) -> dict:
    """A run's decoded text, and its pieces: ("text" | "real" | "literal", text), where "real" is one control
    token and "literal" a control string decoded from ordinary ids."""
    special = np.isin(ids, np.array(sorted(set(tok.special_tokens.values())), dtype=np.int64))
    pieces = []
    for a, b, is_control in _runs(special):
        if is_control:
            pieces += [("real", _decode(tok, ids[k : k + 1])) for k in range(a, b)]
        else:
            pieces += _literal_pieces(_decode(tok, ids[a:b]), tok.control_pattern)
    return {"trained": trained, "text": "".join(t for _, t in pieces), "pieces": pieces}


def _literal_pieces(text: str, pattern) -> list[tuple[str, str]]:
    out, pos = [], 0
    for m in pattern.finditer(text) if pattern is not None else ():
        out += [("text", text[pos : m.start()])] if m.start() > pos else []
        out.append(("literal", m.group()))
        pos = m.end()
    return out + ([("text", text[pos:])] if pos < len(text) else [])


def _runs(flags: np.ndarray) -> list[tuple[int, int, bool]]:
    """Contiguous (start, stop, trained) runs of equal flags."""
    cuts = (np.flatnonzero(np.diff(flags.astype(np.int8))) + 1).tolist()
    bounds = [0, *cuts, len(flags)]
    return [(a, b, bool(flags[a])) for a, b in pairwise(bounds) if b > a]


def _decode(tok, ids: np.ndarray) -> str:
    try:
        return tok.decode(ids)
    except Exception:  # noqa: BLE001 - backends raise different errors for unknown ids; find them one by one
        return "".join(_decode_one(tok, int(t)) for t in ids)


def _decode_one(tok, token: int) -> str:
    try:
        return tok.decode([token])
    except Exception:  # noqa: BLE001 - as above
        return f"<?id {token}?>"


def render_audit(result: dict, *, color: bool = False) -> str:
    """Human-readable audit: counts, problems, warnings, then the examples with trained spans marked."""
    lines = _summary(result)
    for title, items in (("problems", result["problems"]), ("warnings", result["warnings"])):
        if items:
            lines += [f"{title} ({len(items)}):", *(f"  - {p}" for p in items)]
    if picked := result.get("picked"):
        lines += _picked_lines(picked)
    if result["examples"]:
        pool = f"{picked['matching']:,} matching {picked['by']}" if picked else f"{result['documents']:,}"
        shown = f"examples ({len(result['examples'])} of {pool}, spread evenly)"
        lines += ["", f"{shown}; {_legend(result['has_mask'], color)}", ""]
        for example in result["examples"]:
            lines += [_example_title(example), _example_text(example, result["has_mask"], color), ""]
    if result.get("pairs"):
        lines += ["", f"pairs ({len(result['pairs'])}, spread evenly): prompt, then chosen | rejected; "
                  f"{_legend(result['has_mask'], color)}", ""]
        lines += render_pairs(result["pairs"], lambda example: _example_text(example, result["has_mask"], color))
    lines.append(f"FAILED: {_plural(len(result['problems']), 'problem')}" if result["problems"] else "OK: no problems found")
    return "\n".join(lines)


def _picked_lines(picked: dict) -> list[str]:
    if picked["matching"]:
        return []
    return ["", f"no document matches {picked['by']}; sources here: {', '.join(picked['sources']) or 'none'}"]


def _summary(result: dict) -> list[str]:
    counts = ", ".join(_plural(result[k], k[:-1]) for k in ("shards", "documents", "tokens"))
    share = 100 * result["supervised_share"]
    header = result["tokenizer"]
    return [
        f"audit of {result['directory']}",
        f"  {counts}, {result['trained_tokens']:,} trained ({share:.2f} %)",
        f"  tokenizer {header.get('tokenizer')!r}, fingerprint {header.get('tokenizer_fingerprint')}",
        f"  {_decoder_line(result)}",
        *([f"  validation split {val['directory']}: {_plural(val['shards'], 'shard')}, "
           f"{_plural(val['documents'], 'document')}, {_plural(val['tokens'], 'token')}"] if (val := result.get("val")) else []),
    ]


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _decoder_line(result: dict) -> str:
    decoder = result["decoder"]
    if decoder.get("error") or not decoder:
        return "examples not decoded (no tokenizer loaded)"
    verdict = "matches" if result["fingerprint_match"] else "DIFFERS"
    return f"decoded with {decoder['spec']!r}: fingerprint {verdict}"


def _legend(has_mask: bool, color: bool) -> str:
    if not has_mask:
        return "no loss mask: every token is trained"
    if color:
        return (f"legend: {_GREEN}green{_RESET} = trained (in the loss), {_DIM}dim{_RESET} = untrained, "
                f"{_UNDERLINE}{LITERAL_OPEN}<|x|>{LITERAL_CLOSE}{_NO_UNDERLINE} = a control string that is only text")
    return (f"legend: {OPEN}text{CLOSE} = trained (in the loss), unmarked text = untrained, "
            f"{LITERAL_OPEN}<|x|>{LITERAL_CLOSE} = a control string that is only text (not a control token)")


def _example_title(example: dict) -> str:
    cut = f", first {example['shown_tokens']:,} shown" if example["shown_tokens"] < example["tokens"] else ""
    controls = example.get("control_tokens")
    ctl = f", control tokens {controls['real']} real / {controls['literal']} as text" if controls else ""
    return (f"--- #{example['index']}  id={example['id']}  source={example['source']}  "
            f"{example['tokens']:,} tokens, {example['trained']:,} trained{cut}{ctl}")  # fmt: skip


def _piece(kind: str, text: str, color: bool) -> str:
    if kind != "literal":
        return text
    marked = f"{LITERAL_OPEN}{text}{LITERAL_CLOSE}"
    return f"{_UNDERLINE}{marked}{_NO_UNDERLINE}" if color else marked


def _example_text(example: dict, has_mask: bool, color: bool) -> str:
    if not example["segments"]:
        return "(not decoded)"
    parts = []
    for segment in example["segments"]:
        text = "".join(_piece(kind, t.replace("\x1b", "\u241b"), color)  # never let data drive the terminal
                       for kind, t in segment.get("pieces") or [("text", segment["text"])])
        if not has_mask:
            parts.append(text)
        elif color:
            parts.append(f"{_GREEN if segment['trained'] else _DIM}{text}{_RESET}")
        else:
            parts.append(f"{OPEN}{text}{CLOSE}" if segment["trained"] else text)
    return "".join(parts)
