"""Checksums verified once per file: ``stats`` and ``export`` refuse corrupt shards without re-reading them.

``verify_checksums(shards)`` hashes every shard file whose (path, size, mtime, expected sha256) is not in
the cache of files already verified, and raises ``ShardError`` naming the first file that differs. The
cache is ``verified-shards.json`` under ``$TOKENMILL_CACHE`` (default ``~/.cache/tokenmill``); a file that
is rewritten or touched gets a new size or mtime and is hashed again. An unwritable cache only costs the
re-hash next time. ``tokenmill audit`` reads every byte whatever the cache says.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tokenmill.errors import ShardError
from tokenmill.shards.format import file_digest

CACHE_NAME = "verified-shards.json"
CACHE_LIMIT = 100_000  # entries kept; the oldest go first


def cache_path() -> Path:
    return Path(os.environ.get("TOKENMILL_CACHE") or Path.home() / ".cache" / "tokenmill") / CACHE_NAME


def verify_checksums(shards) -> int:
    """Check the sha256 of every file of ``shards`` (a ShardSet) not verified before; returns files hashed."""
    cache = _load()
    hashed = 0
    for shard in shards.shards:
        for name, expected in sorted(shard.header.get("checksums", {}).items()):
            path = shard.directory / name
            key = _key(path, expected)
            if key in cache:
                continue
            if file_digest(path) != expected:
                raise ShardError(f"checksum mismatch in {path}: the file changed after it was written; run "
                                 f"`tokenmill audit {shard.directory}` and rewrite the damaged shard")
            cache[key] = 1
            hashed += 1
    if hashed:
        _save(cache)
    return hashed


def _key(path: Path, expected: str) -> str:
    st = path.stat()
    return f"{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}\0{expected}"


def _load() -> dict[str, int]:
    try:
        doc = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _save(cache: dict[str, int]) -> None:
    path = cache_path()
    keep = dict(list(cache.items())[-CACHE_LIMIT:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{CACHE_NAME}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(keep))
        os.replace(tmp, path)
    except OSError:
        pass  # the cache is an optimisation: the files are hashed again next time
