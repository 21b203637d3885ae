"""What ``tokenmill export --to hf`` writes beside the dataset: the manifest envelope and the data card.

An export is the data of the run that wrote the shards, reshaped: its data card is that run's (counted from
that run's manifest and ledger, :func:`tokenmill.report.datacard.card_data`) with an ``export`` section (format,
sequences, tokens, ``seq_len``), so the folder can be pushed to the Hub as it is. Shards written without a
manifest (``ShardWriter`` directly) get a card of what the shards say: documents, tokens, tokenizer.

``manifest.json`` is the envelope every job writes (``tokenmill``, ``track``, ``inputs``, ``config``,
``counts``, ``identity``, ``run``, ``rejects_file``, ``skipped_inputs``) with the ``export`` section and the
``source`` run (its directory and track); ``counts`` are the source run's (an export drops no record). The
``bin`` and ``megatron`` exports are files, not a folder: their sidecar (``.json``) or index is their record.
"""

from __future__ import annotations

import time
from pathlib import Path

from tokenmill import __version__
from tokenmill.base.accounting import Stats
from tokenmill.report.datacard import card_for, readable_manifest, write_datacard
from tokenmill.report.manifest import write_manifest
from tokenmill.shards.reader import ShardSet


def export_manifest(ds: ShardSet, directory: Path, summary: dict, *, seq_len: int | None, started: float) -> dict:
    """The envelope of an ``hf`` export (module docstring)."""
    source = readable_manifest(directory)
    where = str(directory) if "://" in str(directory) else str(directory.resolve())  # `tokenmill card` reads it later
    stats = Stats(input=ds.n_docs, kept=ds.n_docs, tokens=ds.n_tokens)
    counts = (source or {}).get("counts") or stats.to_dict()
    return {
        "tokenmill": __version__, "track": "export",
        "inputs": [{"path": where, "format": "tokenmill shards", "documents": ds.n_docs,
                    "tokens": ds.n_tokens, "track": (source or {}).get("track")}],
        "config": {"to": "hf", "seq_len": seq_len}, "counts": counts,
        "identity": (source or {}).get("identity") or stats.identity_line(),
        "run": {"seconds": round(time.monotonic() - started, 3), "engine": "this process"},
        "rejects_file": None, "skipped_inputs": [],
        "source": {"path": where, "track": (source or {}).get("track")},
        "tokenizer": {"name": ds.tokenizer_name, "fingerprint": ds.fingerprint, "vocab_size": ds.vocab_size,
                      "eos_id": ds.eos_id, "bos_id": ds.bos_id, "backend": None},
        "export": {"format": "hf", "sequences": summary["n_sequences"], "tokens": summary["n_tokens"],
                   "seq_len": seq_len, "labels": bool(ds.has_mask)},
    }


def write_record(out: Path, ds: ShardSet, directory: Path, summary: dict, *, seq_len: int | None,
                 started: float) -> None:
    """``manifest.json``, ``datacard.json`` and ``datacard.md`` of an ``hf`` export at ``out``."""
    manifest = export_manifest(ds, directory, summary, seq_len=seq_len, started=started)
    write_manifest(out, manifest)
    write_datacard(out, manifest, card_for(out, manifest))
