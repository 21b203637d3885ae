"""Start-up cost of a source read pass by pass at two windows, against the start-up a source already pays.

    python benchmarks/recipe_passes.py [--tokens 1e9] [--no-write]

Data: ``--tokens`` tokens of document lengths only (log-normal; pretraining mean about 1,000 tokens, SFT
mean about 500), no shards: what :class:`~tokenmill.loader.passes.Passes` reads is the length array, the
first window's packing and the schedule's counts. A recipe draws 80% of the first window's samples at 2,048,
then the rest of the run at 8,192 (``concat``: the unread intervals cut into the second window; ``bfd``: the
examples left, packed best-fit-decreasing).

Columns: the first window's own start-up (``concat``: the document offsets; ``bfd``: its best-fit-decreasing
plan, as ``PackedDataset`` builds it), and the added start-up of the continued source (``Passes``: the
bijection over the drawn samples, the unread intervals, the second window's view), in the same process.
Prints the table and rewrites the "Recipe windows: the continued source's start-up" section of BENCHMARKS.md
(unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from common import machine, update_section

HEADING = "Recipe windows: the continued source's start-up"
FIRST, SECOND = 2048, 8192


class Lengths:
    """The parts of a ``PackedDataset`` that ``Passes`` reads, over a length array (no shards)."""

    def __init__(self, lengths: np.ndarray, *, seq_len: int, mode: str):
        from tokenmill.loader.order import epoch_seed
        from tokenmill.pack import best_fit_decreasing

        self.corpus = type("Corpus", (), {"lengths": lengths})()
        self.seq_len, self.mode, self.seed, self.epoch = seq_len, mode, 0, 0
        start = time.perf_counter()
        if mode == "bfd":
            self.plan = best_fit_decreasing(lengths, seq_len, seed=epoch_seed(0, 0))
            self.n = self.plan.n_packs
        else:
            self.plan, self.n = None, int(np.cumsum(lengths.astype(np.int64))[-1]) // seq_len
        self.startup = time.perf_counter() - start

    def __len__(self) -> int:
        return self.n


def lengths(tokens: int, mean: float, cap: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sigma = 1.0
    out = rng.lognormal(np.log(mean) - sigma ** 2 / 2, sigma, size=int(tokens / mean)).astype(np.int64)
    return np.clip(out, 1, cap).astype(np.int32)


def run(tokens: int, mode: str) -> dict:
    from tokenmill.loader.passes import Passes

    lens = lengths(tokens, 1000 if mode == "concat" else 500, 200_000 if mode == "concat" else 8192, seed=1)
    first, second = Lengths(lens, seq_len=FIRST, mode=mode), Lengths(lens, seq_len=SECOND, mode=mode)
    drawn = int(0.8 * len(first))
    start = time.perf_counter()
    passes = Passes([(0, drawn), (1, len(second))], {0: first, 1: second})
    added = time.perf_counter() - start
    view = passes.segments[1].view
    return {"mode": mode, "documents": lens.size, "tokens": int(lens.astype(np.int64).sum()),
            "first": first.startup + second.startup, "added": added, "intervals": int(view.lo.size),
            "samples": len(view)}


def table(rows: list[dict]) -> str:
    out = ["| mode | documents | tokens | the two windows' packing plans (s) | added by the continued source (s) | "
           "intervals left | second window's samples of the pass |", "|---|---|---|---|---|---|---|"]
    out += [f"| {r['mode']} | {r['documents']:,} | {r['tokens']:,} | {r['first']:.2f} | {r['added']:.2f} | "
            f"{r['intervals']:,} | {r['samples']:,} |" for r in rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=float, default=1e9)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = [run(int(args.tokens), mode) for mode in ("concat", "bfd")]
    text = table(rows)
    print(text)
    if not args.no_write:
        update_section(HEADING, f"{machine()}; load average {load:.1f} when it started (seconds are noisy; the "
                                f"two columns come from the same process).\n\nA source used at 2,048 then 8,192 "
                                f"tokens, read pass by pass (docs/recipes.md): what the second window's start-up adds "
                                f"to the packing plans every source pays.\n\n{text}\n\nReproduce: "
                                f"`python benchmarks/recipe_passes.py --tokens {args.tokens:.0e}`.")


if __name__ == "__main__":
    main()
