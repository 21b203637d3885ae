"""What ``tokenmill stats`` reports about a shard directory, and its text rendering."""

from __future__ import annotations

from pathlib import Path

from tokenmill.pack import boundary_aware, packing_stats
from tokenmill.shards.inventory import val_directory


def shard_stats(directory, *, seq_len: int | None = None, batch_size: int = 8) -> dict:
    """Tokens, documents, supervised share; with ``seq_len`` also packed samples and padding shares.

    Reads headers and ``.idx`` offsets (8 bytes per document); the shard files' checksums are verified
    once per file (cached by size and mtime, ``shards/checked.py``), so a corrupt shard is refused.
    """
    from tokenmill.shards import open_shards
    from tokenmill.shards.checked import verify_checksums

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
    if seq_len is not None:
        stats["packing"] = packing_stats(lengths, seq_len, batch_size=batch_size)
        if not shards.has_mask:
            stats["packing"]["concat_samples"] = shards.n_tokens // seq_len
            stats["packing"]["boundary_efficiency"] = boundary_aware(lengths, seq_len).efficiency
    val = val_directory(Path(directory))
    if val is not None:  # a run with a validation split: the numbers of val/ beside the training shards'
        stats["val"] = _val_stats(val, seq_len=seq_len, batch_size=batch_size)
    return stats


def _val_stats(val: Path, *, seq_len: int | None, batch_size: int) -> dict:
    from tokenmill.shards.inventory import shard_headers

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
    lines = _lines({k: v for k, v in stats.items() if k not in ("directory", "track", "tokenizer", "packing", "val")},
                   indent)
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
