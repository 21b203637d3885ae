"""Loader: tokens/s, padding share and first-batch time of tokenmill's loader against HF datasets + collators.

    python benchmarks/loader_throughput.py [--shards DIR] [--synthetic-gb 1] [--no-write]

1. Data: the SFT shards written by ``sft_throughput.py`` (``benchmarks/_work/sft-run/tokenmill_out``; run
   that first). The same examples, truncated to ``--seq-len``, are saved once as a ``datasets`` dataset on
   disk (``input_ids`` per example; not timed).
2. One full epoch of each, every one in a fresh process, 2 ``DataLoader`` workers:
   - tokenmill: ``PackedDataset(mode="bfd")`` + ``PackedCollator`` + ``PackedLoader``, 8 rows x 4,096;
   - HF: ``load_from_disk`` map-style dataset, shuffled, ``DataCollatorWithPadding`` (pad to the longest);
   - HF: the same with ``DataCollatorWithFlattening`` (one row, ``position_ids``, no padding).
   The HF loaders take as many examples per batch as a tokenmill batch holds on average, so each step
   carries about the same real tokens. Real tokens and slots are counted in the collator.
3. Memory: ``--synthetic-gb`` GB of synthetic SFT shards (``ShardWriter``, token ids + loss mask) are
   opened as a ``PackedDataset`` in a fresh process; RSS growth above the process after imports.

Prints the tables and rewrites the "Loader" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from common import machine, run_measured, update_section

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work"
HEADING = "Loader"
APPROACHES = ("tokenmill", "hf_padding", "hf_flattening")
LABELS = {"tokenmill": "tokenmill `PackedLoader` (BFD packs, 8 x 4,096)",
          "hf_padding": "HF `datasets` + `DataCollatorWithPadding`",
          "hf_flattening": "HF `datasets` + `DataCollatorWithFlattening`"}


class Counting:
    """Wraps a collator; adds ``n_real`` (real tokens) to every batch."""

    def __init__(self, collate, real):
        self.collate, self.real = collate, real

    def __call__(self, samples):
        import torch

        batch = self.collate(samples)
        batch["n_real"] = torch.tensor(self.real(samples, batch))
        return batch


def _real_packed(samples, batch) -> int:
    return int(sum(np.asarray(s["input_ids"]).size for s in samples))


def _real_padded(samples, batch) -> int:
    return int(batch["attention_mask"].sum())


def _real_flat(samples, batch) -> int:
    return int(batch["input_ids"].numel())


def tokenmill_loader(shards: Path, *, seq_len: int, batch: int, workers: int):
    from tokenmill.loader import PackedCollator, PackedDataset, PackedLoader

    dataset = PackedDataset(str(shards), seq_len=seq_len, mode="bfd", seed=0)
    pad_id = dataset.corpus.sets[0].pad_id or 0
    collate = Counting(PackedCollator(pad_id=pad_id, pad_to=seq_len), _real_packed)
    return PackedLoader(dataset, batch_size=batch, collate_fn=collate, num_workers=workers)


def hf_loader(name: str, hf_dir: Path, tokenizer: Path, *, examples_per_batch: int, workers: int):
    import torch
    from datasets import load_from_disk
    from transformers import (
        AutoTokenizer,
        DataCollatorWithFlattening,
        DataCollatorWithPadding,
    )

    dataset = load_from_disk(str(hf_dir))
    if name == "hf_padding":
        collate = Counting(DataCollatorWithPadding(AutoTokenizer.from_pretrained(str(tokenizer))), _real_padded)
    else:
        collate = Counting(DataCollatorWithFlattening(), _real_flat)
    return torch.utils.data.DataLoader(dataset, batch_size=examples_per_batch, shuffle=True, collate_fn=collate,
                                       num_workers=workers, generator=torch.Generator().manual_seed(0))


def child_epoch(args: argparse.Namespace) -> dict:
    """One epoch of one approach: seconds to the first batch, total seconds, real tokens and slots."""
    start = time.perf_counter()
    if args.child == "tokenmill":
        loader = tokenmill_loader(Path(args.shards), seq_len=args.seq_len, batch=args.batch, workers=args.workers)
    else:
        loader = hf_loader(args.child, Path(args.hf_dir), Path(args.tokenizer),
                           examples_per_batch=args.examples_per_batch, workers=args.workers)
    first, real, slots, batches = None, 0, 0, 0
    for batch in loader:
        if first is None:
            first = time.perf_counter() - start
        real += int(batch["n_real"])
        slots += int(batch["input_ids"].numel())
        batches += 1
    return {"first_batch_s": first, "seconds": time.perf_counter() - start, "real": real, "slots": slots,
            "batches": batches}


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def child_rss(args: argparse.Namespace) -> dict:
    """RSS growth from opening ``--shards`` as a PackedDataset (and reading one sample), above the baseline.

    The baseline is taken after importing what a training process holds (torch) and what opening the
    shards imports (tokenmill.loader, pyarrow); pyarrow's own import is reported apart.
    """
    import torch  # noqa: F401

    from tokenmill.loader import PackedCollator, PackedDataset  # noqa: F401

    before_arrow = rss_mb()
    import pyarrow.parquet  # noqa: F401  (the shard reader's dependency, imported on open)

    base = rss_mb()
    start = time.perf_counter()
    dataset = PackedDataset(args.shards, seq_len=args.seq_len, mode="bfd", seed=0)
    open_s = time.perf_counter() - start
    opened = rss_mb()
    sample = dataset[0]
    return {"baseline_mb": base, "pyarrow_mb": base - before_arrow, "open_mb": opened - base,
            "after_sample_mb": rss_mb() - base, "open_s": open_s,
            "docs": int(dataset.corpus.lengths.size), "tokens": int(dataset.corpus.lengths.sum()),
            "samples": len(dataset), "sample_tokens": int(np.asarray(sample["input_ids"]).size)}


def synthetic_shards(gb: float, *, seed: int = 0) -> Path:
    """About ``gb`` GB of SFT-like shards (uint32 ids + mask, log-normal lengths) in ``_work`` (reused)."""
    from tokenmill.shards import ShardWriter

    out = WORK / f"synthetic-{gb:g}gb"
    if (out / "done").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    info = {"name": "synthetic", "fingerprint": "synthetic-vocab-151665", "vocab_size": 151665, "pad_id": 0}
    rng = np.random.default_rng(seed)
    target_tokens, written, k = int(gb * 1e9 / 5), 0, 0  # 4 bytes of id + 1 of mask per token
    with ShardWriter(out, stem_prefix="synthetic", tokenizer_info=info, with_mask=True, max_tokens=1 << 26) as w:
        while written < target_tokens:
            lengths = np.clip(rng.lognormal(5.5, 0.8, 20000).astype(np.int64), 8, 8192)
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            ids = rng.integers(0, 151665, int(offsets[-1]), dtype=np.uint32)
            mask = rng.random(int(offsets[-1])) < 0.6
            names = [f"s{k + i}" for i in range(lengths.size)]
            w.add_many(ids, offsets, rec_ids=names, sources=["synthetic"] * lengths.size, flat_mask=mask)
            written, k = written + int(offsets[-1]), k + lengths.size
    (out / "done").write_text(str(written))
    return out


def hf_dataset(shards: Path, seq_len: int) -> tuple[Path, int, int]:
    """The shards' examples as a ``datasets`` dataset on disk; (path, examples, BFD packs at ``seq_len``)."""
    from datasets import Dataset, load_from_disk

    from tokenmill import open_shards
    from tokenmill.pack import best_fit_decreasing

    shard_set = open_shards(shards)
    packs = best_fit_decreasing(shard_set.lengths, seq_len).n_packs
    out = WORK / f"hf-sft-{seq_len}"
    if not out.exists() or len(load_from_disk(str(out))) != len(shard_set):
        rows = [shard_set.doc_tokens(i)[:seq_len].astype(np.int64).tolist() for i in range(len(shard_set))]
        Dataset.from_dict({"input_ids": rows}).save_to_disk(str(out))
    return out, len(shard_set), packs


def run_child(name: str, args: argparse.Namespace, **extra) -> dict:
    cmd = [sys.executable, str(Path(__file__)), "--child", name, "--shards", str(extra.get("shards", args.shards)),
           "--seq-len", str(args.seq_len), "--batch", str(args.batch), "--workers", str(args.workers),
           "--hf-dir", str(extra.get("hf_dir", "")), "--tokenizer", str(args.tokenizer),
           "--examples-per-batch", str(extra.get("examples_per_batch", 1))]
    runs = []
    for _ in range(1 if name == "rss" else args.repeat):
        res = run_measured(cmd)
        if res["rc"] != 0:
            raise SystemExit(f"{name} failed:\n{res['stderr'][-4000:]}")
        runs.append({**json.loads(res["stdout"].strip().splitlines()[-1]), "peak_rss_mb": res["peak_rss_mb"]})
    best = min(runs, key=lambda r: r.get("seconds", 0))
    best["all_seconds"] = [r.get("seconds", 0) for r in runs]
    return best


def render(epochs: dict, rss: dict, args: argparse.Namespace, *, examples: int, per_batch: int, gb: float) -> str:
    lines = [(f"Data: the {examples:,} SFT examples written by `sft_throughput.py` (Qwen2 tokenizer). Each loader "
              f"runs one epoch in a fresh process, {args.repeat} times (fastest reported), {args.workers} `DataLoader` "
              f"workers, CPU tensors. Machine: {machine()}; 1-min load average {args.load:.2f} when the run began."),
             "",
             ("| loader | batches | real tokens | padding share | first batch s | epoch s (best) | all runs s "
              "| tokens/s | peak RSS MB |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in epochs.items():
        pad = 100 * (1 - r["real"] / r["slots"])
        runs = ", ".join(f"{x:.1f}" for x in r["all_seconds"])
        lines.append(f"| {LABELS[name]} | {r['batches']:,} | {r['real']:,} | {pad:.1f}% | {r['first_batch_s']:.2f} | "
                     f"{r['seconds']:.1f} | {runs} | {r['real'] / r['seconds']:,.0f} | {r['peak_rss_mb']:.0f} |")
    tm = epochs["tokenmill"]["real"] / epochs["tokenmill"]["seconds"]
    ratios = ", ".join(f"{tm / (r['real'] / r['seconds']):.2f}x vs {LABELS[n].split(' + ')[-1]}"
                       for n, r in epochs.items() if n != "tokenmill")
    memory = (
        f"Opening {gb:g} GB of synthetic SFT shards ({rss['docs']:,} examples, {rss['tokens']:,} tokens, uint32 ids "
        f"+ mask) as `PackedDataset(seq_len={args.seq_len}, mode=\"bfd\")`: {rss['open_s']:.2f} s (lengths read, BFD "
        f"plan of {rss['samples']:,} packs), RSS +{rss['open_mb']:.1f} MB ({1e6 * rss['open_mb'] / rss['docs']:.0f} "
        f"bytes per example) above the {rss['baseline_mb']:.0f} MB of the process after imports (torch, "
        f"tokenmill.loader, pyarrow; importing pyarrow itself adds {rss['pyarrow_mb']:.0f} MB); "
        f"+{rss['after_sample_mb']:.1f} MB after reading one sample (target < 50 MB)."
    )
    lines += ["", f"tokenmill tokens/s: {ratios}.", "", memory, "", NOTES.strip(), "",
              ("Reproduce (from the repository root, after `python benchmarks/sft_throughput.py`): "
               f"`python benchmarks/loader_throughput.py --synthetic-gb {gb:g}`.")]
    return "\n".join(lines).replace("{per_batch}", f"{per_batch}")


NOTES = """
The HF loaders take {per_batch} examples per batch, the mean number of examples in a tokenmill batch of
8 packs, so every approach moves about the same real tokens per step. `DataCollatorWithPadding` pads
`input_ids` and `attention_mask` to the longest example of the batch (examples cut to 4,096 tokens);
`DataCollatorWithFlattening` concatenates the batch into one row with `position_ids` and boundary-masked
`labels`, so it has no padding but gives a row of varying length (about 8 x 4,096 tokens). tokenmill's
rows are fixed at 4,096 and carry `labels` from the loss mask and per-example `position_ids`. Real tokens and
slots are counted inside each collator; "padding share" is pad slots / all slots. Time to the first batch
counts from opening the data (`PackedDataset(...)` / `load_from_disk`) through the workers' start.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", default=str(WORK / "sft-run" / "tokenmill_out"))
    ap.add_argument("--tokenizer", default=str(WORK / "qwen2.5_sft_tokenizer"))
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--synthetic-gb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3, help="fresh-process epochs of each; the fastest is reported")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--child", choices=(*APPROACHES, "rss"))
    ap.add_argument("--hf-dir")
    ap.add_argument("--examples-per-batch", type=int, default=1)
    args = ap.parse_args()
    args.load = os.getloadavg()[0]
    if args.child:
        print(json.dumps(child_rss(args) if args.child == "rss" else child_epoch(args)))
        return
    if not (Path(args.shards) / "manifest.json").exists():
        raise SystemExit(f"no shards in {args.shards}: run `python benchmarks/sft_throughput.py` first")
    hf_dir, examples, packs = hf_dataset(Path(args.shards), args.seq_len)
    per_batch = max(1, round(args.batch * examples / packs))
    epochs = {name: run_child(name, args, hf_dir=hf_dir, examples_per_batch=per_batch) for name in APPROACHES}
    rss = run_child("rss", args, shards=synthetic_shards(args.synthetic_gb))
    body = render(epochs, rss, args, examples=examples, per_batch=per_batch, gb=args.synthetic_gb)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)


if __name__ == "__main__":
    main()
