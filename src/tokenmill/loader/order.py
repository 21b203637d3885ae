"""The global sample order and its split across ranks and workers, with O(1) memory per rank.

Order. Epoch ``e`` with seed ``s`` visits sample ``perm(p)`` at global position ``p``, where ``perm`` is a
keyed 4-round Feistel bijection over ``[0, n)`` (cycle-walking inside the next power of 4; fewer than 4
walks on average). Nothing of size ``n`` is stored: a position maps to its sample in about 1 us.

Split. Global positions are dealt round-robin: rank ``r`` of ``W`` gets ``start + r + W * i``. When every
rank takes ``B`` samples per step, ``t`` steps consume exactly positions ``[start, start + t * B * W)``,
so the resume cursor is one number (global samples consumed) and any new ``W`` or ``B`` resumes from it.
DataLoader workers of one rank take whole batches in turn (batch ``b`` -> worker ``b % num_workers``),
which is how ``torch.utils.data.DataLoader`` hands out a sampler's batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

from tokenmill.errors import ConfigError

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def epoch_seed(seed: int, epoch: int) -> int:
    """A 63-bit seed for (seed, epoch), stable across platforms and numpy versions."""
    return int(np.random.SeedSequence([int(seed), int(epoch)]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def permute(positions: npt.ArrayLike, n: int, *, seed: int) -> np.ndarray:
    """Map positions in ``[0, n)`` to samples through a seeded bijection of ``[0, n)``."""
    x = np.asarray(positions, dtype=np.uint64).copy()
    if n <= 1:
        return x.astype(np.int64)
    bits = max(2, int(n - 1).bit_length())
    half = (bits + 1) // 2
    keys = np.random.SeedSequence(int(seed)).generate_state(4, np.uint64)
    out = _feistel(x, keys, half)
    walk = out >= n
    while walk.any():
        out[walk] = _feistel(out[walk], keys, half)
        walk = out >= n
    return out.astype(np.int64)


def _feistel(x: np.ndarray, keys: np.ndarray, half: int) -> np.ndarray:
    shift, mask = np.uint64(half), np.uint64((1 << half) - 1)
    left, right = x >> shift, x & mask
    for key in keys:
        left, right = right, left ^ (_mix(right ^ key) & mask)
    return (left << shift) | right


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (wrapping uint64 arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def partition(n: int, *, rank: int, world_size: int, worker_id: int = 0, num_workers: int = 1,
              start: int = 0, batch_size: int = 1) -> Iterable[int]:
    """Global positions in ``[start, n)`` for one (rank, worker), in the order that worker serves them.

    Ranks take positions round-robin; the workers of a rank take that rank's batches of ``batch_size``
    in turn. Over all ranks and workers every position appears exactly once. With one worker the
    result is a ``range`` (O(1) memory).
    """
    _check_split(rank=rank, world_size=world_size, worker_id=worker_id, num_workers=num_workers,
                 batch_size=batch_size, start=start)
    if num_workers == 1:
        return range(start + rank, max(n, start + rank), world_size)
    return _worker_positions(n, rank, world_size, worker_id, num_workers, start, batch_size)


def _worker_positions(n, rank, world_size, worker_id, num_workers, start, batch_size) -> Iterator[int]:
    first = start + rank
    n_rank = max(0, -(-(n - first) // world_size))  # positions this rank owns
    for b in range(worker_id, -(-n_rank // batch_size), num_workers):
        lo = first + world_size * b * batch_size
        hi = first + world_size * min((b + 1) * batch_size, n_rank)
        yield from range(lo, hi, world_size)


def _check_split(**values: int) -> None:
    problems = [f"{k} must be >= 0, got {v}" for k, v in values.items() if v < 0]
    for size, index in (("world_size", "rank"), ("num_workers", "worker_id")):
        if values[size] < 1 or not 0 <= values[index] < values[size]:
            problems.append(f"{index}={values[index]} must be in [0, {size}={values[size]})")
    if values["batch_size"] < 1:
        problems.append(f"batch_size must be >= 1, got {values['batch_size']}")
    if problems:
        raise ConfigError(problems)
