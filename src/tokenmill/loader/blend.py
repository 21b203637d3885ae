"""``BlendedDataset``: several packed datasets mixed by weight, decided per sample on the fly.

Rule. The components form a balanced binary tree. At a node whose halves weigh ``a`` and ``b``
(integers), the node's ``k``-th sample goes left iff ``floor(((k + 1) * a + h) / (a + b))`` exceeds
``floor((k * a + h) / (a + b))`` with ``h = (a + b) // 2``; its index in the chosen half is that floor
(left) or ``k`` minus it (right). This is the lowest-error deterministic interleave of two streams
(a Bresenham line), applied per level: after any ``k`` samples each component is within
``log2(components)`` samples of its exact share. Cost: O(log components) integer steps per sample,
no blend index stored. Each sample is a whole packed sample of one component, so every document keeps
its own loss mask.
"""

from __future__ import annotations

from tokenmill.errors import ConfigError
from tokenmill.loader.corpus import check_same_tokenizer, open_sets
from tokenmill.loader.dataset import PackedDataset

_SCALE = 1 << 32


class BlendedDataset:
    """Map-style blend of ``[(PackedDataset | shard dir | ShardSet, weight), ...]``.

    Sources that are not yet datasets are opened with ``seq_len`` and the mode of their track
    (``bfd`` for shards with a loss mask, ``concat`` otherwise). ``num_samples`` defaults to the most
    samples for which no component repeats; a larger value repeats the smaller components in order.
    """

    def __init__(self, components: list, *, seq_len: int | None = None, seed: int = 0, epoch: int = 0,
                 num_samples: int | None = None, tokenizer=None):
        if not components:
            raise ConfigError("BlendedDataset needs at least one (dataset, weight) pair")
        self.datasets = [_as_dataset(src, seq_len, seed, tokenizer) for src, _ in components]
        problems = [f"weight {w!r} of component {i} must be a positive number"
                    for i, (_, w) in enumerate(components) if not float(w) > 0]
        if len({d.seq_len for d in self.datasets}) > 1:
            problems.append(f"components have different seq_len: {[d.seq_len for d in self.datasets]}")
        if problems:
            raise ConfigError(problems)
        check_same_tokenizer([(d.tokenizer_fingerprint, f"component {i}") for i, d in enumerate(self.datasets)])
        total = sum(float(w) for _, w in components)
        self.weights = [max(1, round(float(w) / total * _SCALE)) for _, w in components]
        self.seq_len, self.seed = self.datasets[0].seq_len, int(seed)
        self.num_samples = num_samples
        self.set_epoch(epoch)

    @property
    def fingerprint(self) -> str:
        parts = [f"{w}@{d.fingerprint}" for w, d in zip(self.weights, self.datasets)]
        return "blend(" + ",".join(parts) + ")"

    tokenizer_fingerprint = property(lambda self: self.datasets[0].tokenizer_fingerprint)
    tokenizer = property(lambda self: self.datasets[0].tokenizer)
    vocab_size = property(lambda self: self.datasets[0].vocab_size)
    pad_id = property(lambda self: self.datasets[0].pad_id)
    eos_id = property(lambda self: self.datasets[0].eos_id)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        for d in self.datasets:
            d.set_epoch(self.epoch)
        self._len = self.num_samples if self.num_samples is not None else self._no_repeat_len()

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, k) -> dict:
        if not 0 <= k < self._len:
            raise IndexError(f"sample index {k!r} out of range for {self._len} samples")
        i, j = self.route(int(k))
        dataset = self.datasets[i]
        return dataset[j % len(dataset)]

    def route(self, k: int) -> tuple[int, int]:
        """(component, index inside it) of blended sample ``k``."""
        return route(k, self.weights)

    def counts(self, n: int) -> list[int]:
        """Samples each component contributes to the first ``n`` blended samples."""
        return counts(n, self.weights)

    def _no_repeat_len(self) -> int:
        """Largest n whose counts stay within every component's length (binary search)."""
        sizes = [len(d) for d in self.datasets]
        lo, hi = 0, sum(sizes) + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            ok = all(c <= s for c, s in zip(self.counts(mid), sizes))
            lo, hi = (mid, hi) if ok else (lo, mid)
        return lo


def route(k: int, weights: list[int]) -> tuple[int, int]:
    """(component, index inside it) of sample ``k`` of the counter rule over integer ``weights`` (a zero
    weight takes nothing)."""
    lo, hi = 0, len(weights)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        a, b = sum(weights[lo:mid]), sum(weights[mid:hi])
        left = _taken(k, a, b)
        if _taken(k + 1, a, b) > left:
            hi, k = mid, left
        else:
            lo, k = mid, k - left
    return lo, k


def counts(n: int, weights: list[int], lo: int = 0, hi: int | None = None) -> list[int]:
    """Samples each component gives to the first ``n`` samples of the counter rule over ``weights``."""
    hi = len(weights) if hi is None else hi
    if hi - lo == 1:
        return [n]
    if n == 0:
        return [0] * (hi - lo)
    mid = (lo + hi) // 2
    left = _taken(n, sum(weights[lo:mid]), sum(weights[mid:hi]))
    return counts(left, weights, lo, mid) + counts(n - left, weights, mid, hi)


def _taken(k: int, a: int, b: int) -> int:
    """Samples among the first ``k`` that go to the side of weight ``a``."""
    return (k * a + (a + b) // 2) // (a + b)


def _as_dataset(source, seq_len, seed, tokenizer):
    if isinstance(source, PackedDataset):
        return source
    if seq_len is None:
        raise ConfigError("seq_len is required when blend components are shard directories or ShardSets")
    sets = open_sets(source, tokenizer=tokenizer)
    mode = "bfd" if any(s.has_mask for s in sets) else "concat"
    return PackedDataset(sets, seq_len=seq_len, mode=mode, seed=seed, tokenizer=tokenizer)
