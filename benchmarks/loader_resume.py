"""Loader resume: a seek, not a replay. Time from ``load_state_dict`` to the first batch, against replaying.

    python benchmarks/loader_resume.py [--tokens 1e9] [--no-write]

1. Data: ``--tokens`` synthetic pretraining tokens (uint16 ids, log-normal document lengths, mean about
   1,000 tokens) written once with ``ShardWriter`` into ``benchmarks/_work/resume-<tokens>`` (reused).
2. A recipe over it: 8 ranks x batch 8 (global batch 64), a stable phase at 2,048 tokens (80% of the
   tokens) then a long phase at 8,192 (the same folder at a second window), drawing every token once.
3. Seek: for rank 3 of 8, a fresh ``PackedLoader.from_recipe`` (its opening timed on its own), then
   ``load_state_dict`` at a sample index and ``next(iter(loader))``: the time between is the resume.
   Resume points at 10%, 50%, 90% and the last step of the run (inside the long phase).
4. Replay: the same rank's loader from the start, iterating (and collating) every batch up to the 10%
   point, as a loader without a seek must; the other points' replay is that rate times their steps.

Prints the table and rewrites the "Loader resume" section of BENCHMARKS.md (unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from common import machine, update_section

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work"
HEADING = "Loader resume: a seek, not a replay"
SEQ, LONG, BATCH, WORLD, RANK = 2048, 8192, 8, 8, 3


def synthetic(tokens: int, *, seed: int = 0) -> tuple[Path, float]:
    """``tokens`` pretraining tokens in ``_work/resume-<tokens>`` (written once, reused), and the seconds the
    writing took (recorded beside the shards)."""
    from tokenmill.shards import ShardWriter

    out = WORK / f"resume-{tokens:.0e}"
    if (out / "done").exists():
        return out, float((out / "done").read_text().split()[1])
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    info = {"name": "synthetic", "fingerprint": "synthetic-vocab-50257", "vocab_size": 50257, "eos_id": 50256}
    rng, written, k = np.random.default_rng(seed), 0, 0
    with ShardWriter(out, stem_prefix="resume", tokenizer_info=info, max_tokens=1 << 27) as w:
        while written < tokens:
            lengths = np.clip(rng.lognormal(6.5, 0.9, 20000).astype(np.int64), 8, 65536)
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            ids = rng.integers(0, 50256, int(offsets[-1]), dtype=np.uint16)
            names = [f"d{k + i}" for i in range(lengths.size)]
            w.add_many(ids, offsets, rec_ids=names, sources=["synthetic"] * lengths.size)
            written, k = written + int(offsets[-1]), k + lengths.size
    seconds = time.perf_counter() - t0
    (out / "done").write_text(f"{written} {seconds:.1f}")
    return out, seconds


def write_recipe(shards: Path, tokens: int) -> Path:
    path = shards.parent / f"{shards.name}.recipe.yaml"
    path.write_text(f"""seq_len: {SEQ}
total_tokens: {tokens}
batch: {BATCH}
world_size: {WORLD}
sources: {{web: {{path: {shards}}}}}
phases:
  - {{name: stable, share: 0.8, weights: {{web: 1}}}}
  - {{name: long, share: 0.2, seq_len: {LONG}, weights: {{web: 1}}}}
""")
    return path


def open_loader(recipe: Path):
    from tokenmill.loader import PackedLoader

    t0 = time.perf_counter()
    loader = PackedLoader.from_recipe(recipe, rank=RANK)
    return loader, time.perf_counter() - t0


def seek(recipe: Path, cursor: int) -> dict:
    loader, open_s = open_loader(recipe)
    state = {**loader.state_dict(), "cursor": cursor}
    t0 = time.perf_counter()
    loader.load_state_dict(state)
    batch = next(iter(loader))
    seek_s = time.perf_counter() - t0
    return {"open_s": open_s, "seek_s": seek_s, "rows": tuple(batch["input_ids"].shape)}


def replay(recipe: Path, steps: int) -> float:
    """Seconds to iterate ``steps`` batches from the start, then the next one (the first new batch)."""
    loader, _ = open_loader(recipe)
    t0 = time.perf_counter()
    for i, _batch in enumerate(loader):
        if i == steps:
            break
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=float, default=1e9)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    tokens = int(args.tokens)
    import torch  # noqa: F401  (imported before any timing: the loader imports it on its first batch)

    shards, write_s = synthetic(tokens)
    short = f"{args.tokens:.0e}".replace("e+0", "e").replace("e+", "e")
    recipe = write_recipe(shards, tokens)
    loader, _ = open_loader(recipe)
    n, g = len(loader.dataset), BATCH * WORLD
    steps = n // g
    points = {"10%": steps // 10, "50%": steps // 2, "90%": steps * 9 // 10, "last step": steps - 1}
    replay_steps = points["10%"]
    replay_s = replay(recipe, replay_steps)
    rows = []
    for label, step in points.items():
        got = seek(recipe, step * g)
        rows.append((label, step, got, replay_s * step / replay_steps))
    lines = [f"Data: {tokens:,.0f} synthetic pretraining tokens (uint16 ids, {shards.name}, written once with "
             f"`ShardWriter` in {write_s:.0f} s), a recipe of {steps:,} steps of {WORLD} ranks x {BATCH} "
             f"(stable at {SEQ:,} tokens, 80%; long at {LONG:,}, 20%). Rank {RANK} of {WORLD}, `PackedCollator`, "
             f"no workers. Machine: {machine()}.", "",
             "| resume at | step | open (`from_recipe`) s | `load_state_dict` -> first batch s | replay to it s |",
             "|---|---:|---:|---:|---:|"]
    for label, step, got, rep in rows:
        kind = "measured" if step == replay_steps else "rate x steps"
        lines.append(f"| {label} | {step:,} | {got['open_s']:.2f} | {got['seek_s']:.3f} | {rep:,.1f} ({kind}) |")
    lines += ["", "The resume is one number (global samples consumed): `load_state_dict` sets the cursor, and the "
              "first batch maps its positions through the keyed permutation and reads those samples from the "
              "memory-mapped shards, so its time does not grow with the step. A loader without a seek replays "
              "(reads and collates) every earlier batch of its rank. Opening the recipe (shard headers, `.idx` "
              "offsets, the packing plans) is paid by any restart, seek or not.", "",
              f"Reproduce: `python benchmarks/loader_resume.py --tokens {short}`."]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        update_section(HEADING, body)


if __name__ == "__main__":
    main()
