"""Train a ~100M-parameter Llama-config model on padded vs packed batches from tokenmill SFT shards.

    python benchmarks/gpu_train.py [--shards DIR] [--device cuda] [--steps 50] [--json OUT.json]
    python benchmarks/gpu_train.py --device cpu --steps 5 --tiny        # smoke check without a GPU

Both modes read the same shards through tokenmill and train a fresh model (same seed) for ``--steps``
timed steps after ``--warmup`` untimed ones, with the same slot budget per step (``--batch`` x ``--seq-len``):

- packed: ``PackedDataset(mode="bfd")`` + ``PackedCollator``: ``--batch`` rows of ``--seq-len`` holding
  whole examples, ``position_ids`` restarting per example, no attention mask, ``use_cache=False``
  (transformers then keeps attention inside each example);
- padded: shuffled examples, one per row, as many as fit in the same slots when padded to the longest of
  the batch (``PackedCollator(padding=True)``, with an ``attention_mask``).

Reports real (non-pad) tokens/s, slots/s, the padding share, peak GPU memory and GPU utilisation
(``torch.cuda.utilization()``, sampled every 0.2 s during the timed steps; nvidia-smi when NVML is missing).
Default sizes (hidden 512, 8 layers, tied embeddings with the Qwen2 vocabulary: about 103M parameters,
8 x 4,096 tokens per step, bf16 autocast) finish well inside 5 minutes on one H200.
The shards default to those of ``sft_throughput.py``; on another machine copy them along and put
``src`` on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
FULL = {"hidden_size": 512, "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 8,
        "intermediate_size": 1408}
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
        "intermediate_size": 128}


def build_model(vocab_size: int, *, tiny: bool, seq_len: int, device: str, seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, max_position_embeddings=seq_len, tie_word_embeddings=True,
                         use_cache=False, attn_implementation="sdpa", **(TINY if tiny else FULL))
    return LlamaForCausalLM(config).to(device)


class Counted:
    """Wraps a collator; adds ``n_real``, the real (non-pad) tokens of the batch."""

    def __init__(self, collate):
        self.collate = collate

    def __call__(self, samples: list[dict]) -> dict:
        batch = self.collate(samples)
        batch["n_real"] = torch.tensor(sum(np.asarray(s["input_ids"]).size for s in samples))
        return batch


def packed_batches(shards: str, *, seq_len: int, batch: int, pad_id: int):
    """Endless packed batches (epochs re-planned) from tokenmill's loader."""
    from tokenmill.loader import PackedCollator, PackedDataset, PackedLoader

    dataset = PackedDataset(shards, seq_len=seq_len, mode="bfd", seed=0)
    collate = Counted(PackedCollator(pad_id=pad_id, pad_to=seq_len))
    loader = PackedLoader(dataset, batch_size=batch, collate_fn=collate, num_workers=2)
    while True:
        yield from loader


def padded_batches(shards: str, *, seq_len: int, batch: int, pad_id: int, seed: int = 0):
    """Endless padded batches: shuffled examples (cut to ``seq_len``), one per row, within batch x seq_len slots."""
    from tokenmill import open_shards
    from tokenmill.loader import PackedCollator

    shard_set = open_shards(shards)
    collate = Counted(PackedCollator(pad_id=pad_id, padding=True))
    budget, rng = batch * seq_len, np.random.default_rng(seed)
    while True:
        rows, longest = [], 0
        for i in rng.permutation(len(shard_set)).tolist():
            ids = shard_set.doc_tokens(i)[:seq_len]
            if rows and max(longest, ids.size) * (len(rows) + 1) > budget:
                yield collate(rows)
                rows, longest = [], 0
            mask = shard_set.doc_mask(i)[:seq_len]
            rows.append({"input_ids": ids, "loss_mask": mask, "seq_lens": np.array([ids.size])})
            longest = max(longest, ids.size)


class Utilisation:
    """Samples GPU utilisation (%) in a thread while active; mean of the samples."""

    def __init__(self, device: str, period: float = 0.2):
        self.device, self.period, self.samples, self._stop = device, period, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> float | None:
        try:
            return float(torch.cuda.utilization())
        except (ModuleNotFoundError, RuntimeError):  # no NVML binding: ask nvidia-smi
            pass
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=5, check=False).stdout
            return float(out.split()[0])
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            return None

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            value = self._read()
            if value is not None:
                self.samples.append(value)

    def __enter__(self):
        if self.device.startswith("cuda"):
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.samples)) if self.samples else None


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def train(mode: str, args: argparse.Namespace, vocab_size: int, pad_id: int) -> dict:
    """Warm-up plus ``args.steps`` timed steps of one mode; throughput and utilisation."""
    model = build_model(vocab_size, tiny=args.tiny, seq_len=args.seq_len, device=args.device, seed=args.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=args.device.startswith("cuda"))
    make = packed_batches if mode == "packed" else padded_batches
    batches = make(args.shards, seq_len=args.seq_len, batch=args.batch, pad_id=pad_id)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    real = slots = 0
    losses = []
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            _sync(args.device)
            util = Utilisation(args.device).__enter__()
            start = time.perf_counter()
        batch = next(batches)
        real_here = int(batch.pop("n_real"))
        batch = {k: v.to(args.device, non_blocking=True) for k, v in batch.items()}
        with torch.autocast(device_type=args.device.split(":")[0], dtype=dtype, enabled=dtype != torch.float32):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= args.warmup:
            real, slots = real + real_here, slots + batch["input_ids"].numel()
            losses.append(loss.detach())
    _sync(args.device)
    seconds = time.perf_counter() - start
    util.__exit__()
    return {"mode": mode, "steps": args.steps, "seconds": seconds, "real_tokens": real, "slots": slots,
            "tokens_per_s": real / seconds, "slots_per_s": slots / seconds, "padding_share": 1 - real / slots,
            "gpu_util_pct": util.mean, "final_loss": float(torch.stack(losses).float().mean()),
            "peak_mem_gb": torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else None,
            "params_m": sum(p.numel() for p in model.parameters()) / 1e6}


def shard_info(shards: str) -> tuple[int, int]:
    """(vocab size, pad id) from the shards' tokenizer header."""
    from tokenmill import open_shards

    shard_set = open_shards(shards)
    header = shard_set.shards[0].header
    pad = header.get("pad_id")
    return int(header["vocab_size"]), int(pad if pad is not None else header.get("eos_id") or 0)


def render(results: list[dict], args: argparse.Namespace) -> str:
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    lines = [(f"{results[0]['params_m']:.1f}M parameters, {args.batch} x {args.seq_len} slots per step, "
             f"{args.steps} timed steps after {args.warmup} warm-up, device {device}."), "",
             "| batches | real tokens/s | slots/s | padding share | GPU util % | peak GPU GB | mean loss |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        util = "n/a" if r["gpu_util_pct"] is None else f"{r['gpu_util_pct']:.0f}"
        mem = "n/a" if r["peak_mem_gb"] is None else f"{r['peak_mem_gb']:.1f}"
        lines.append(f"| {r['mode']} | {r['tokens_per_s']:,.0f} | {r['slots_per_s']:,.0f} | "
                     f"{100 * r['padding_share']:.1f}% | {util} | {mem} | {r['final_loss']:.3f} |")
    by = {r["mode"]: r for r in results}
    if {"packed", "padded"} <= set(by):
        ratio = by["packed"]["tokens_per_s"] / by["padded"]["tokens_per_s"]
        lines += ["", f"packed / padded real tokens/s: {ratio:.2f}x"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", default=str(HERE / "_work" / "sft-run" / "tokenmill_out"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--tiny", action="store_true", help="a 2-layer model, 2 x 256 slots: a CPU smoke check")
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--modes", nargs="+", default=["padded", "packed"], choices=["padded", "packed"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    args.seq_len = args.seq_len or (256 if args.tiny else 4096)
    args.batch = args.batch or (2 if args.tiny else 8)
    if args.tiny:
        args.warmup = min(args.warmup, 1)
    vocab, pad_id = shard_info(args.shards)
    results = []
    for mode in args.modes:
        results.append(train(mode, args, vocab, pad_id))
        print(json.dumps(results[-1]), flush=True)
    print(render(results, args))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))


if __name__ == "__main__":
    main()
