"""``tokenmill export --out s3://...``: the export written in a local work directory, then uploaded.

The target is refused as a local one is (:func:`tokenmill.shards.export.check_target`), against the objects
in the bucket: an existing object of a target name is replaced only with ``--overwrite`` and only when a
tokenmill export of that format wrote it (``bin``: its ``.json`` sidecar; ``megatron``: its ``.idx`` header;
``hf``: a prefix whose ``manifest.json`` is an export's). The bucket's lock object is held while uploading
(``engine/store.py``: one run at a time). Each object appears whole; the format's record (sidecar, index,
``manifest.json``, the very first for ``hf``) is uploaded first, so a run killed midway leaves a target that
``--overwrite`` takes; on the machine that ran it, its work directory is left too, and the same command again,
with no ``--overwrite``, uploads the same bytes. The work directory
is ``$TOKENMILL_CACHE/out/<hash of the URL>`` (``work_dir_for``), emptied of the export once uploaded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tokenmill.engine.store import Store, hold_store, open_store, work_dir_for
from tokenmill.errors import ConfigError
from tokenmill.shards.export_record import RECORD_SUFFIXES

RECORDS = (".json", ".idx", "manifest.json")  # what says an object set is a tokenmill export: uploaded first


def split_url(url: str) -> tuple[str, str]:
    """``s3://b/p/tokens.bin`` -> (``s3://b/p``, ``tokens.bin``): the prefix a file export's store opens."""
    parent, _, name = url.rstrip("/").rpartition("/")
    if not name or parent.endswith(":/"):
        raise ConfigError(f"--out {url}: give the object's path inside a bucket, e.g. s3://bucket/exports/tokens.bin")
    return parent, name


def remote_names(to: str, name: str) -> list[str]:
    """The object names an export to ``to`` writes under its prefix (``hf``: everything below it)."""
    record = [f"{name}{suffix}" for suffix in RECORD_SUFFIXES]  # the export's envelope and data card
    return {"megatron": [f"{name}.bin", f"{name}.idx", *record],
            "bin": [name, f"{name}.json", f"{name}.mask", *record]}.get(to, [])


def check_remote(store: Store, to: str, name: str, *, overwrite: bool) -> None:
    """The refusals of a local target, against the bucket's objects (module docstring)."""
    existing = store.files() if to == "hf" else [n for n in remote_names(to, name) if store.read(n) is not None]
    existing = [n for n in existing if not n.startswith("_state/")]
    if not existing:
        return
    if not overwrite:
        raise ConfigError(f"--out {store.where(existing[0] if to != 'hf' else '')}: exists; pass --overwrite to "
                          "replace an earlier export, or choose another path")
    if not _own(store, to, name):
        raise ConfigError(f"--out {store.where(existing[0])} exists and is not a {to} export; --overwrite replaces "
                          "only an earlier export of the same format: choose another path")


def _own(store: Store, to: str, name: str) -> bool:
    try:
        if to == "hf":
            return json.loads(store.read("manifest.json") or b"{}").get("track") == "export"
        if to == "bin":
            return json.loads(store.read(f"{name}.json") or b"{}").get("format") == "tokenmill-bin"
        return (store.read(f"{name}.idx") or b"").startswith(b"MMIDIDX\x00\x00")
    except (ValueError, AttributeError):
        return False


def export_remote(directory: Any, *, to: str, url: str, seq_len: int | None, overwrite: bool, dry_run: bool,
                  local_export: Any) -> dict:
    """Export to object storage: ``local_export(out=...)`` into the work directory, then the upload."""
    prefix, name = (url.rstrip("/"), "") if to == "hf" else split_url(url)
    store = open_store(prefix)
    work = work_dir_for(url)
    local = work / "export" if to == "hf" else work / name
    check_remote(store, to, name, overwrite=overwrite or _killed(work))  # before anything is written
    if dry_run:
        summary = local_export(out=local, overwrite=True, dry_run=True)
        return {**summary, "paths": [store.url] if to == "hf" else [store.where(Path(p).name) for p in summary["paths"]]}
    work.mkdir(parents=True, exist_ok=True)
    with hold_store(store):
        check_remote(store, to, name, overwrite=overwrite or _killed(work))  # again under the lock
        summary = local_export(out=local, overwrite=True, dry_run=False)
        rels = _upload(store, to, local, summary)
    shutil.rmtree(work, ignore_errors=True)
    return {**summary, "paths": [store.where(r) for r in rels] if to != "hf" else [store.url]}


def _killed(work: Path) -> bool:
    """Whether an export into this URL was killed before its end: its work directory, emptied once the upload
    is done, still holds files. The same export again then replaces what that one uploaded, with no
    ``--overwrite`` (:func:`check_remote` still refuses objects no tokenmill export wrote)."""
    return work.is_dir() and any(p.is_file() for p in work.rglob("*"))


def _upload(store: Store, to: str, local: Path, summary: dict) -> list[str]:
    """Upload the export's files, its record first; return their names under the prefix."""
    if to == "hf":
        files = {str(p.relative_to(local)): p for p in local.rglob("*") if p.is_file()
                 and p.relative_to(local).parts[0] != "_state"}
    else:
        files = {Path(p).name: Path(p) for p in summary["paths"]}
    first = {"hf": "manifest.json", "bin": f"{local.name}.json", "megatron": f"{local.name}.idx"}[to]
    for rel in sorted(files, key=lambda rel: _upload_order(rel, first)):
        store.put(files[rel], rel)
    return sorted(files)


def _upload_order(rel: str, first: str) -> tuple[int, str]:
    """The format's record first (what :func:`_own` reads: ``manifest.json`` for ``hf``, ``state.json`` or
    ``datacard.json`` up without it left a target ``--overwrite`` refused forever), then the other records, then
    the data."""
    return (0 if rel == first else 1 if rel.endswith(RECORDS) else 2, rel)
