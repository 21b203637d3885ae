"""What a shard directory should hold, against what it holds: no shard may vanish without a word.

A shard whose header is missing or does not parse would simply not be listed by a glob over headers,
and its documents would silently drop out of training. So every data file (``.ids``, ``.mask``, ``.idx``,
``.docs``) must belong to a readable header, and when the directory has the ``manifest.json`` of the
run that wrote it, the headers must be exactly the shards it lists, with its document and token counts.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenmill.shards.format import DOC_SUFFIXES, read_header

MANIFEST = "manifest.json"


def shard_headers(directory: Path) -> list[tuple[Path, dict]]:
    """(path, header) of every readable shard header in ``directory``, sorted by name."""
    return [(p, h) for p in sorted(directory.glob("*.json")) if (h := read_header(p))]


def inventory_problems(directory: Path, headers: list[tuple[Path, dict]]) -> list[str]:
    """Orphaned data files, unreadable headers, and disagreements with the run's manifest; [] when sound."""
    stems = {p.name[: -len(".json")] for p, _ in headers}
    problems = []
    for stem, names in sorted(_data_files(directory).items()):
        if stem not in stems:
            header = directory / f"{stem}.json"
            why = "is missing" if not header.exists() else "is not a readable tokenmill shard header"
            problems.append(f"{', '.join(sorted(names))}: the header {header.name} {why}; these documents would "
                            "be skipped: restore the header or rewrite the shards")
    manifest = _manifest(directory)
    if manifest is not None:
        problems += _against_manifest(manifest, stems, headers)
    return problems


def _data_files(directory: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in directory.iterdir() if directory.is_dir() else ():
        stem, dot, suffix = path.name.rpartition(".")
        if dot and suffix in DOC_SUFFIXES and path.is_file():
            found.setdefault(stem, []).append(path.name)
    return found


def _manifest(directory: Path) -> dict | None:
    try:
        doc = json.loads((directory / MANIFEST).read_bytes())
    except (OSError, ValueError):
        return None  # no manifest (shards written by ShardWriter alone), or reported by the reader
    return doc if isinstance(doc, dict) and isinstance(doc.get("shards"), list) else None


def _against_manifest(manifest: dict, stems: set[str], headers: list[tuple[Path, dict]]) -> list[str]:
    listed = {str(s) for s in manifest["shards"]}
    problems = [f"{MANIFEST} lists shard {s}, whose header is missing or unreadable" for s in sorted(listed - stems)]
    problems += [f"shard {s} is not listed in {MANIFEST}: it was left by another run; move it to its own directory"
                 for s in sorted(stems - listed)]
    counts = _shard_counts(manifest)
    if problems or not counts:
        return problems
    docs = sum(int(h.get("n_docs", 0)) for _, h in headers)
    tokens = sum(int(h.get("n_tokens", 0)) for _, h in headers)
    for name, found, key in (("documents", docs, "kept"), ("tokens", tokens, "tokens")):
        if key in counts and int(counts[key]) != found:
            problems.append(f"the shards hold {found:,} {name} but {MANIFEST} counts {int(counts[key]):,}")
    return problems


def _shard_counts(manifest: dict) -> dict:
    """What the directory's own shards hold: the run's kept records, less its validation split when it has one
    (``manifest["split"]["train"]``; the ``val/`` directory has its own manifest)."""
    train = manifest.get("split", {}).get("train") if isinstance(manifest.get("split"), dict) else None
    if isinstance(train, dict):
        return {"kept": train.get("documents", 0), "tokens": train.get("tokens", 0)}
    if isinstance(manifest.get("documents"), int):  # a run whose records are several documents (pref: 3 a pair)
        return {**(manifest.get("counts") or {}), "kept": manifest["documents"]}
    return manifest.get("counts") or {}


def no_shards(directory: Path) -> str:
    """Why ``directory`` holds no shards, and what to do: a curation run's output (or its ``documents/``) holds
    documents to tokenize, not shards to write."""
    directory = Path(directory)
    run = directory.parent if directory.name == "documents" else directory
    try:
        track = json.loads((run / MANIFEST).read_bytes()).get("track")
    except (OSError, ValueError, AttributeError):
        track = None
    if track == "curate" and (run / "documents").is_dir():
        return (f"{directory} holds the documents of a curation run (`tokenmill curate`), not token shards: "
                f"tokenize them with `tokenmill pretrain {run / 'documents'} --out SHARDS --tokenizer TOKENIZER` "
                "(or `tokenmill sft` for conversations), then audit SHARDS")
    return (f"no tokenmill shard headers (*.json with magic 'tokenmill-shard') in {directory}; check the path "
            "(the --out of `tokenmill pretrain` or `tokenmill sft`), or write shards with ShardWriter")


def val_directory(directory: Path) -> Path | None:
    """The validation shard directory of a run made with a validation split (``val/``), else None."""
    manifest = _manifest(Path(directory))
    split = manifest.get("split") if manifest else None
    val = split.get("val") if isinstance(split, dict) else None
    if not isinstance(val, dict) or not isinstance(val.get("directory"), str):
        return None
    return Path(directory) / val["directory"]
