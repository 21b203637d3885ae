"""py3langid's model as the batch identifier's tables, kept uncompressed and memory-mapped.

Loading the shipped model costs about 0.65 s of CPU in every process that identifies languages: LZMA
decompression of 4.5 MB into 60 MB of arrays, py3langid's conversion to Python lists, then the batch
identifier's own conversions and automaton depth (:func:`tokenmill.curate.filters.langid_batch.tables_of`). The
first load writes the result, :class:`~tokenmill.curate.filters.langid_batch.Tables`, under
``$TOKENMILL_CACHE/langid/<key>/`` (one ``.npy`` per array plus ``tables.json``: about 130 MB for the
shipped model); later loads map those files read-only (milliseconds), and every process that maps them
shares one copy in the page cache.

The key is a digest of what decides the tables: :data:`VERSION` (bumped when :func:`tables_of` changes),
py3langid's version, the model file's bytes and the candidate labels, so another model file, an edited one
or other candidates never reuse an entry. An entry that does not read back as its ``tables.json`` says
(a missing, truncated or foreign file) is ignored and written again; a cache that cannot be written only
costs the load next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tokenmill.curate.filters.langid_batch import Tables, tables_of
from tokenmill.tokenize.sources import cache_dir

VERSION = 2


def cached_tables(model: Path, candidates: Sequence[str], load: Callable[[], Any]) -> Tables:
    """The tables of the py3langid model file ``model`` restricted to ``candidates`` (model labels; empty: all),
    from the cache, else from ``load()`` (a ``LanguageIdentifier``), written to the cache for next time."""
    entry = cache_dir() / "langid" / entry_key(model, candidates)
    tables = read_entry(entry)
    if tables is None:
        tables = tables_of(load())
        write_entry(entry, tables)
    return tables


def entry_key(model: Path, candidates: Sequence[str]) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        langid_version = version("py3langid")
    except PackageNotFoundError:
        langid_version = "none"
    h = hashlib.sha256(f"{VERSION}\0{langid_version}\0{','.join(sorted(set(candidates)))}\0".encode())
    h.update(Path(model).read_bytes())
    return h.hexdigest()[:32]


def read_entry(entry: Path) -> Tables | None:
    """The tables kept in ``entry``, memory-mapped; None when there are none or they do not match their index."""
    try:
        meta = json.loads((entry / "tables.json").read_text())
        arrays = {}
        for name in Tables.ARRAYS:
            arr = np.asarray(np.load(entry / f"{name}.npy", mmap_mode="r", allow_pickle=False))
            if arr.dtype.str != meta["dtypes"][name] or list(arr.shape) != meta["shapes"][name]:
                return None
            arrays[name] = arr
        return Tables(**arrays, classes=tuple(meta["classes"]),
                      alias_pairs=tuple((int(i), int(j)) for i, j in meta["alias_pairs"]), depth=int(meta["depth"]),
                      root=int(meta["root"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_entry(entry: Path, tables: Tables) -> None:
    """Write ``tables`` to ``entry`` through a temporary sibling directory renamed into place (never raises)."""
    tmp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"classes": list(tables.classes), "alias_pairs": [list(p) for p in tables.alias_pairs],
                                "depth": tables.depth, "root": tables.root, "dtypes": {}, "shapes": {}}
        for name in Tables.ARRAYS:
            arr = np.ascontiguousarray(getattr(tables, name))
            np.save(tmp / f"{name}.npy", arr, allow_pickle=False)
            meta["dtypes"][name], meta["shapes"][name] = arr.dtype.str, list(arr.shape)
        (tmp / "tables.json").write_text(json.dumps(meta))
        try:
            os.rename(tmp, entry)
        except OSError:  # an entry is there: another process's (kept), or one that did not read back (replaced)
            if read_entry(entry) is None:
                shutil.rmtree(entry, ignore_errors=True)
                os.rename(tmp, entry)
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
