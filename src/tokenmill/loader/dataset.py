"""``PackedDataset``: fixed-length packed samples planned at load time from the length arrays.

Modes. ``bfd`` (SFT and any data with a loss mask): whole examples packed best-fit-decreasing, a new
plan per epoch from ``epoch_seed(seed, epoch)``; 2 int32 per example (example index and length).
``concat`` (pretraining): the stream cut into ``seq_len`` windows, nothing stored per sample, one int64
token offset per document. ``boundary``: whole documents in order,
long ones cut (see :mod:`tokenmill.pack.chunk`). Sample ``k`` of an epoch is plan entry ``permute(k)``
(a seeded bijection, see :mod:`tokenmill.loader.order`) unless ``shuffle=False``.

Start-up reads the ``.idx`` offsets of every shard in chunks, keeps one int32 length per document and
plans: about 0.2 s and 12 MB per million SFT examples. A sample is read from the memory-mapped shards when it is asked for.
"""

from __future__ import annotations

import numpy as np

from tokenmill.errors import ConfigError, RoutingError
from tokenmill.loader.corpus import Corpus, open_sets, select_docs
from tokenmill.loader.order import epoch_seed, permute
from tokenmill.pack import PackPlan, best_fit_decreasing, boundary_aware, window_pieces

MODES = ("bfd", "concat", "boundary")


class PackedDataset:
    """Map-style dataset of packed samples: ``{"input_ids", "loss_mask", "seq_lens"}`` as numpy arrays, plus
    ``loss_weights`` (float32 per token) when the shards carry per-message loss weights.

    ``seq_lens`` holds the length of every document piece in the sample, in order; rows are not padded.
    ``cap_tokens`` keeps only the documents within the first that many tokens; ``upsample_long=(min_tokens,
    factor)`` serves documents of ``min_tokens`` or more ``factor`` times per epoch (length-aware sampling for
    long-context training, Fu et al. 2024); both change the fingerprint. A directory of an unfinished run (no
    ``manifest.json`` yet) is refused unless ``allow_partial=True``.
    """

    def __init__(self, sources, *, seq_len: int, mode: str = "bfd", seed: int = 0, epoch: int = 0,
                 shuffle: bool = True, tokenizer=None, cap_tokens: int | None = None,
                 upsample_long: tuple[int, int] | None = None, allow_partial: bool = False):
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if int(seq_len) < 1:
            raise ConfigError(f"seq_len must be >= 1, got {seq_len}")
        self.corpus = select_docs(Corpus(open_sets(sources, tokenizer=tokenizer, allow_partial=allow_partial)),
                                  cap_tokens=cap_tokens, upsample_long=upsample_long)
        if self.corpus.has_mask and mode != "bfd":
            raise RoutingError(
                f"these shards carry a loss mask (SFT data); mode={mode!r} would cut examples and let them "
                "attend to each other: use mode='bfd'"
            )
        self.seq_len, self.mode, self.seed, self.shuffle = int(seq_len), mode, int(seed), shuffle
        self._doc_offsets = _offsets(self.corpus.lengths) if mode == "concat" else None
        self._plan = boundary_aware(self.corpus.lengths, self.seq_len) if mode == "boundary" else None
        self.set_epoch(epoch)

    @property
    def fingerprint(self) -> str:
        """Tokenizer fingerprint plus a digest of the document lengths."""
        return self.corpus.fingerprint

    @property
    def tokenizer_fingerprint(self) -> str:
        return self.corpus.tokenizer_fingerprint

    @property
    def tokenizer(self) -> dict:
        """What the shards record about their tokenizer: ``name``, ``fingerprint``, ``path`` (where it was read
        from, None for the embedded one), ``origin``, ``vocab_size``, ``bos_id``, ``eos_id``, ``pad_id``.
        Load it with ``tokenmill.load_tokenizer(ds.tokenizer["path"] or ds.tokenizer["name"])``."""
        header = self.corpus.sets[0].header
        return {"name": header["tokenizer"], "fingerprint": header["tokenizer_fingerprint"],
                **{k: v for k, v in (header.get("tokenizer_info") or {}).items() if k not in ("name", "fingerprint")}}

    @property
    def vocab_size(self) -> int:
        """Ids are below this: the size a model's embedding needs at least."""
        return int(self.corpus.sets[0].vocab_size)

    @property
    def eos_id(self) -> int | None:
        """The tokenizer's end-of-sequence id (None when it has none)."""
        eos = self.corpus.sets[0].eos_id
        return None if eos is None else int(eos)

    @property
    def pad_id(self) -> int:
        """The tokenizer's pad id, else its EOS id, else 0: padding is never trained (labels -100)."""
        first = self.corpus.sets[0]
        return next((int(i) for i in (first.pad_id, first.eos_id) if i is not None), 0)

    @property
    def plan(self):
        """The current :class:`~tokenmill.pack.PackPlan` (None in ``concat`` mode)."""
        return self._plan

    def set_epoch(self, epoch: int) -> None:
        """Re-plan (``bfd``) and re-shuffle for ``epoch``; same (seed, epoch), same samples."""
        self.epoch = int(epoch)
        if self.mode == "bfd":
            self._plan = best_fit_decreasing(self.corpus.lengths, self.seq_len,
                                             seed=epoch_seed(self.seed, self.epoch))

    def __len__(self) -> int:
        if self._doc_offsets is not None:  # concat: windows of the token stream
            return int(self._doc_offsets[-1]) // self.seq_len
        return self._packs.n_packs

    @property
    def _packs(self) -> PackPlan:
        """The packing plan of a ``bfd`` or ``boundary`` dataset (``concat`` has ``_doc_offsets`` instead)."""
        if self._plan is None:
            raise TypeError("a concat dataset has no packing plan")
        return self._plan

    def __getitem__(self, k) -> dict:
        n = len(self)
        if not isinstance(k, (int, np.integer)) or not -n <= k < n:
            raise IndexError(f"sample index {k!r} out of range for {n} samples")
        return packed_sample(self.corpus, *self.pieces(int(k) % n))

    def pieces(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(documents, start inside each, lengths) of sample ``k`` of this epoch."""
        entry = int(permute([k], len(self), seed=epoch_seed(self.seed, self.epoch))[0]) if self.shuffle else k
        if self._doc_offsets is not None:  # concat
            start = entry * self.seq_len
            return window_pieces(self._doc_offsets, start, start + self.seq_len)
        return self._packs.pack(entry)


def packed_sample(corpus, docs, starts, lens) -> dict:
    """The sample made of the pieces ``(docs[j], starts[j], lens[j])`` of ``corpus``."""
    ids, mask, weights = corpus.read(docs, starts, lens)
    sample = {"input_ids": ids, "loss_mask": mask, "seq_lens": np.asarray(lens).astype(np.int32)}
    if weights is not None:
        sample["loss_weights"] = weights
    return sample


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """Cumulative token offsets with a leading 0 (int64, ``n_docs + 1`` entries)."""
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets
