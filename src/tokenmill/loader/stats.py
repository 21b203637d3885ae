"""What ``tokenmill stats`` reports about a shard directory, and its text rendering."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokenmill.pack import boundary_aware, packing_stats
from tokenmill.shards import open_shards
from tokenmill.shards.checked import verify_checksums
from tokenmill.shards.inventory import shard_headers, val_directory
from tokenmill.shards.pairs_audit import pair_stats


def shard_stats(directory, *, seq_len: int | None = None, batch_size: int = 8) -> dict:
    """Tokens, documents, supervised share; with ``seq_len`` also packed samples and padding shares.

    Reads headers and ``.idx`` offsets (8 bytes per document); the shard files' checksums are verified
    once per file (cached by size and mtime, ``shards/checked.py``), so a corrupt shard is refused.
    """

    shards = open_shards(directory)
    verify_checksums(shards)  # once per file, cached by size and mtime
    lengths = shards.lengths
    trained = shards.n_trained_tokens if shards.has_mask else shards.n_tokens
    stats = {
        "directory": str(directory),
        "tokenizer": shards.tokenizer_name,
        "tokenizer_fingerprint": shards.fingerprint,
        "track": "sft" if shards.has_mask else "pretrain",
        "shards": len(shards.shards),
        "documents": shards.n_docs,
        "tokens": shards.n_tokens,
        "trained_tokens": int(trained),
        "supervised_share": trained / shards.n_tokens if shards.n_tokens else 0.0,
        "doc_tokens_mean": float(lengths.mean()) if lengths.size else 0.0,
        "doc_tokens_max": int(lengths.max()) if lengths.size else 0,
    }
    if (shards.manifest or {}).get("track") == "pref":  # pairs: prompt, chosen, rejected documents each
        stats.update(track="pref", **pair_stats(shards))
    stats["by_length"] = length_table(lengths, _doc_sources(shards))
    if seq_len is not None:
        stats["packing"] = _packing(shards, lengths, seq_len, batch_size=batch_size)
    val = val_directory(Path(directory))
    if val is not None:  # a run with a validation split: the numbers of val/ beside the training shards'
        stats["val"] = _val_stats(val, seq_len=seq_len, batch_size=batch_size)
    return stats


def _packing(shards, lengths: np.ndarray, seq_len: int, *, batch_size: int) -> dict:
    """The numbers of the loader modes these shards can be packed with: SFT shards ``bfd`` (whole examples;
    those over ``seq_len`` dropped) against naive padding; pretraining shards ``concat`` and ``boundary``,
    which cut long documents instead of dropping them (no ``dropped_over_length``: nothing is dropped)."""
    long = lengths[lengths > seq_len].astype(np.int64).sum()
    long_share = float(long / shards.n_tokens) if shards.n_tokens else 0.0
    if shards.has_mask:
        return {**packing_stats(lengths, seq_len, batch_size=batch_size), "long_doc_share": long_share}
    boundary = boundary_aware(lengths, seq_len)
    return {"seq_len": int(seq_len), "long_doc_share": long_share, "concat_samples": shards.n_tokens // seq_len,
            "boundary_samples": int(boundary.n_packs), "boundary_efficiency": boundary.efficiency}


BUCKETS = (0, 512, 2048, 8192, 32768, 131072)


def _bucket_name(lo: int, hi: int | None) -> str:
    short = {0: "0", 512: "512", 2048: "2k", 8192: "8k", 32768: "32k", 131072: "128k"}
    return f">={short[lo]}" if hi is None else f"{short[lo]}-{short[hi]}"


def _doc_sources(shards) -> np.ndarray:
    """The ``source`` (input file) of every document, from the shards' doc records."""
    parts = [s.docs.column("source").to_numpy(zero_copy_only=False) for s in shards.shards if s.docs is not None]
    return np.concatenate(parts) if parts else np.zeros(0, object)


def length_table(lengths: np.ndarray, sources: np.ndarray) -> dict[str, list[dict]]:
    """Documents and tokens by document-length bucket (``[lo, hi)`` tokens), per source and for ``all``."""
    lengths = lengths.astype(np.int64)
    out = {"all": _buckets(lengths)}
    if sources.size == lengths.size:
        for name in sorted(set(sources.tolist())):
            out[str(name)] = _buckets(lengths[sources == name])
    return out


def _buckets(lengths: np.ndarray) -> list[dict]:
    total = int(lengths.sum())
    highs: list[int | None] = [*BUCKETS[1:], None]
    rows = []
    for lo, hi in zip(BUCKETS, highs):
        inside = lengths[(lengths >= lo) & ((lengths < hi) if hi is not None else True)]
        rows.append({"bucket": _bucket_name(lo, hi), "min_tokens": lo, "max_tokens": hi, "documents": int(inside.size),
                     "tokens": int(inside.sum()), "share": int(inside.sum()) / total if total else 0.0})
    return rows


def render_length_table(table: dict[str, list[dict]], indent: str = "") -> list[str]:
    """One line per source: its share of tokens in each length bucket."""
    names = [r["bucket"] for r in table["all"]]
    width = max(len(n) for n in table)
    lines = [f"{indent}tokens by document length:", f"{indent}  {'source'.ljust(width)}  " + "  ".join(f"{n:>9}" for n in names)]
    for source, rows in table.items():
        lines.append(f"{indent}  {source.ljust(width)}  " + "  ".join(f"{100 * r['share']:>8.1f}%" for r in rows))
    return lines


def _val_stats(val: Path, *, seq_len: int | None, batch_size: int) -> dict:

    if not shard_headers(val):  # an empty split (a tiny --val-fraction): nothing to open
        return {"directory": str(val), "shards": 0, "documents": 0, "tokens": 0}
    found = shard_stats(val, seq_len=seq_len, batch_size=batch_size)
    return {k: v for k, v in found.items() if k not in ("tokenizer", "tokenizer_fingerprint", "track")}


def render_stats(stats: dict) -> str:
    """Aligned ``key: value`` lines; shares as percentages."""
    lines = [f"{stats['directory']}  ({stats['track']}, tokenizer {stats['tokenizer']})"]
    lines += _body(stats)
    if "val" in stats:
        lines.append(f"validation split {stats['val']['directory']}:")
        lines += _body(stats["val"], indent="  ")
    return "\n".join(lines)


def _body(stats: dict, indent: str = "") -> list[str]:
    lines = _lines({k: v for k, v in stats.items()
                    if k not in ("directory", "track", "tokenizer", "packing", "val", "by_length")}, indent)
    if "by_length" in stats:
        lines += render_length_table(stats["by_length"], indent)
    if "packing" in stats:
        lines.append(f"{indent}packing at seq_len {stats['packing']['seq_len']}:")
        lines += _lines({k: v for k, v in stats["packing"].items() if k != "seq_len"}, indent=indent + "  ")
    return lines


def _lines(values: dict, indent: str = "") -> list[str]:
    width = max(len(k) for k in values)
    return [f"{indent}{k.ljust(width)}  {_fmt(k, v)}" for k, v in values.items()]


def _fmt(key: str, value) -> str:
    if isinstance(value, float) and ("share" in key or "efficiency" in key):
        return f"{100 * value:.2f} %"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
