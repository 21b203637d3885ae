"""What ``tokenmill export`` writes beside the exported data: the manifest envelope and the data card.

An export is the data of the run that wrote the shards, reshaped: its data card is that run's (counted from
that run's manifest and ledger, :func:`tokenmill.report.datacard.card_data`) with an ``export`` section (format,
sequences, tokens, ``seq_len``), so the folder can be pushed to the Hub as it is. Shards written without a
manifest (``ShardWriter`` directly) get a card of what the shards say: documents, tokens, tokenizer.

``manifest.json`` is the envelope every job writes (``tokenmill``, ``track``, ``inputs``, ``config``,
``counts``, ``identity``, ``run``, ``rejects_file``, ``skipped_inputs``) with the ``export`` section and the
``source`` run (its directory and track); ``counts`` are the source run's (an export drops no record). The
``bin`` and ``megatron`` exports are files, not a folder: their envelope and card are files beside them, named
after ``--out`` (``OUT.manifest.json``, ``OUT.datacard.json``, ``OUT.datacard.md``), and their ``export`` section
also names the files the export wrote (and, for ``bin``, the token dtype). Megatron's and nanoGPT's readers open
their own files by name and never see them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from tokenmill import __version__
from tokenmill.base.accounting import Stats
from tokenmill.report.datacard import card_for, readable_manifest, render, write_datacard
from tokenmill.report.manifest import peak_rss_mb, write_manifest
from tokenmill.shards.reader import ShardSet

RECORD_SUFFIXES = (".manifest.json", ".datacard.json", ".datacard.md")  # beside a bin or megatron export's files


def export_manifest(ds: ShardSet, directory: Path, summary: dict, *, seq_len: int | None, started: float,
                    to: str = "hf") -> dict:
    """The envelope of an export (module docstring)."""
    source = readable_manifest(directory)
    where = str(directory) if "://" in str(directory) else str(directory.resolve())  # `tokenmill card` reads it later
    stats = Stats(input=ds.n_docs, kept=ds.n_docs, tokens=ds.n_tokens)
    counts = (source or {}).get("counts") or stats.to_dict()
    return {
        "tokenmill": __version__, "track": "export",
        "inputs": [{"path": where, "format": "tokenmill shards", "documents": ds.n_docs,
                    "tokens": ds.n_tokens, "track": (source or {}).get("track")}],
        "config": {"to": to, "seq_len": seq_len}, "counts": counts,
        "identity": (source or {}).get("identity") or stats.identity_line(),
        "run": {"seconds": round(time.monotonic() - started, 3), "peak_rss": peak_rss_mb([]), "units": len(ds.shards),
                "engine": "this process"},  # one pass over the shards, in order
        "rejects_file": None, "skipped_inputs": [],
        "source": {"path": where, "track": (source or {}).get("track")},
        "tokenizer": {"name": ds.tokenizer_name, "fingerprint": ds.fingerprint, "vocab_size": ds.vocab_size,
                      "eos_id": ds.eos_id, "bos_id": ds.bos_id, "backend": None},
        "export": {"format": to, "sequences": summary["n_sequences"], "tokens": summary["n_tokens"],
                   "seq_len": seq_len, "labels": bool(ds.has_mask),
                   **({} if to == "hf" else {"files": [Path(p).name for p in summary["paths"]]}),
                   **({"dtype": summary["dtype"]} if "dtype" in summary else {})},
    }


def write_record(out: Path, ds: ShardSet, directory: Path, summary: dict, *, seq_len: int | None,
                 started: float) -> None:
    """``manifest.json``, ``datacard.json`` and ``datacard.md`` of an ``hf`` export at ``out``."""
    manifest = export_manifest(ds, directory, summary, seq_len=seq_len, started=started)
    write_manifest(out, manifest)
    write_datacard(out, manifest, card_for(out, manifest))


def write_file_record(out: Path, ds: ShardSet, directory: Path, summary: dict, *, to: str, seq_len: int | None,
                      started: float, at: Callable[[str], Path]) -> list[str]:
    """The envelope and card of a ``bin`` or ``megatron`` export, written at ``at(path)`` (the temporary names
    the export renames once all is whole); returns their paths (module docstring)."""
    manifest = export_manifest(ds, directory, summary, seq_len=seq_len, started=started, to=to)
    card = card_for(directory, manifest)
    paths = [f"{out}{suffix}" for suffix in RECORD_SUFFIXES]
    contents = [json.dumps(manifest, indent=2, default=str) + "\n", json.dumps(card, indent=2, default=str) + "\n",
                render(card)]
    for path, text in zip(paths, contents):
        at(path).write_bytes(text.encode())
    return paths
