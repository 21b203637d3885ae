"""``RecipeDataset``: a :class:`~tokenmill.loader.recipe.Recipe` served as one map-style dataset.

It is a :class:`~tokenmill.loader.schedule.ScheduledBlend` underneath: each source becomes one packed
dataset per sequence length it is used at (``web``, or ``web@2048`` and ``web@32768`` when phases differ),
each phase a schedule phase ending at its last step. So the order, the per-source counters that continue
across phases and the exact resume with another world size are the schedule's own; what this adds is
the recipe's vocabulary (phases and sources by name), phases that train every token
(``ignore_loss_mask``), the validation split of each source per phase, and token counts per sample
taken from the packing plan (no token is read to count them). A source used at several windows is read
pass by pass: a window continues where the one before stopped (:mod:`tokenmill.loader.passes`).
"""

from __future__ import annotations

import numpy as np

from tokenmill.engine.store import readable
from tokenmill.errors import ConfigError, TokenmillError
from tokenmill.loader.dataset import PackedDataset, packed_sample
from tokenmill.loader.order import epoch_seed, permute
from tokenmill.loader.passes import Passes, continued
from tokenmill.loader.recipe import Phase, Recipe, Source, load_recipe
from tokenmill.loader.schedule import ScheduledBlend
from tokenmill.shards import open_shards
from tokenmill.shards.inventory import shard_headers, val_directory
from tokenmill.tokenize.identity import fingerprint_of


def component_keys(recipe: Recipe) -> dict[tuple[str, int], str]:
    """``(source, seq_len) -> component name`` for every source used by some phase."""
    used: dict[str, list[int]] = {}
    for p in recipe.phases:
        for name, w in p.weights:
            if w > 0 and p.seq_len not in used.setdefault(name, []):
                used[name].append(p.seq_len)
    return {(name, n): (name if len(lens) == 1 else f"{name}@{n}") for name, lens in used.items() for n in lens}


def open_source(source: Source, seq_len: int, *, seed: int, tokenizer=None, directory=None) -> PackedDataset:
    """The packed dataset of one source at one sequence length (``directory`` replaces its path: val/)."""
    where = directory or source.path
    try:
        shards = open_shards(where, tokenizer=tokenizer)
        mode = source.mode or ("bfd" if shards.has_mask else "concat")
        if directory is not None:  # a validation split: all of it, in order, never capped or upsampled
            return PackedDataset(shards, seq_len=seq_len, mode=mode, seed=seed, shuffle=False)
        upsample = (source.upsample_long.min_tokens, source.upsample_long.factor) if source.upsample_long else None
        return PackedDataset(shards, seq_len=seq_len, mode=mode, seed=seed, cap_tokens=source.cap_tokens,
                             upsample_long=upsample)
    except TokenmillError as exc:
        raise ConfigError(f"sources.{source.name}.path: {exc}") from exc


def check_tokenizers(recipe: Recipe) -> None:
    """One tokenizer for every source, else a ConfigError naming each source's tokenizer; every source that
    cannot be opened is named in the same error."""
    found, unreadable = {}, []
    for s in recipe.sources:
        try:
            shards = open_shards(s.path)
        except TokenmillError as exc:
            unreadable.append(f"sources.{s.name}.path: {exc}")
            continue
        found[s.name] = (shards.tokenizer_name, shards.fingerprint)
    if unreadable:
        raise ConfigError(unreadable)
    if len({fp for _, fp in found.values()}) > 1:
        listed = ", ".join(f"{n!r} {name} ({fp[:12]})" for n, (name, fp) in found.items())
        raise ConfigError(f"sources: mismatched tokenizers: {listed}; data trained together must share one "
                          "tokenizer: re-tokenize the odd source with the model's tokenizer")


class RecipeDataset:
    """Map-style dataset of a recipe's whole run (a :class:`Recipe` or the path of its file): samples
    ``[0, total_samples)`` (each phase's steps x its global batch); ``tokenizer=`` refuses sources written
    with another tokenizer."""

    def __init__(self, recipe, *, tokenizer=None, epoch: int = 0):
        recipe = recipe if isinstance(recipe, Recipe) else load_recipe(recipe)  # a Recipe or its file
        check_tokenizers(recipe)
        self.recipe = recipe
        tokenizer = None if tokenizer is None else fingerprint_of(tokenizer)  # loaded once, checked per source
        self.keys = component_keys(recipe)
        self.source_of_component = {key: name for (name, _), key in self.keys.items()}
        components = {key: open_source(recipe.source(name), n, seed=recipe.seed, tokenizer=tokenizer)
                      for (name, n), key in self.keys.items()}
        empty = [f"sources.{name}: no sample of {n:,} tokens can be made from it ({_tokens(components[key]):,} "
                 "tokens; SFT examples longer than the window are left out): lower the phase's seq_len or drop "
                 "the source from it" for (name, n), key in self.keys.items() if len(components[key]) == 0]
        if empty:
            raise ConfigError(empty)
        self.blend = ScheduledBlend(components, self._schedule(), num_samples=recipe.total_samples,
                                    global_batch_size=recipe.global_batch, seed=recipe.seed, epoch=epoch)
        self._pack_tokens: dict[int, np.ndarray] = {}
        self.passes: dict[int, Passes] = continued(self.blend, self.source_of_component)

    def _schedule(self) -> list[dict]:
        """One schedule phase per recipe phase, ending at its last step; a recipe with one batch size keeps the
        schedule (and so the fingerprint, which loader states and run logs carry) it had before phases could
        set their own."""
        out, step, sample = [], 0, 0
        own = any(p.batch is not None for p in self.recipe.phases)
        for p in self.recipe.phases:
            step, sample = step + p.steps, sample + p.steps * self.recipe.phase_global_batch(p)
            weights = {self.keys[(n, p.seq_len)]: w for n, w in p.weights if w > 0}
            end = {"until_sample": sample, "batch": p.batch} if own else {"until_step": step}
            out.append({"name": p.name, **end, "weights": weights, "seq_len": p.seq_len,
                        "ignore_loss_mask": p.ignore_loss_mask})
        return out

    names = property(lambda self: self.blend.names)
    datasets = property(lambda self: self.blend.datasets)
    # a source read pass by pass across windows serves other samples than two packings did: another fingerprint
    fingerprint = property(lambda self: ("recipe:passes:" if self.passes else "recipe:") + self.blend.fingerprint)
    seed = property(lambda self: self.blend.seed)
    epoch = property(lambda self: self.blend.epoch)
    seq_len = property(lambda self: max(self.blend.phase_seq_lens))
    tokenizer_fingerprint = property(lambda self: self.blend.tokenizer_fingerprint)
    tokenizer = property(lambda self: self.blend.tokenizer)
    vocab_size = property(lambda self: self.blend.vocab_size)
    pad_id = property(lambda self: self.blend.pad_id)
    eos_id = property(lambda self: self.blend.eos_id)

    def set_epoch(self, epoch: int) -> None:
        self.blend.set_epoch(epoch)
        self._pack_tokens.clear()
        self.passes = continued(self.blend, self.source_of_component)

    def __len__(self) -> int:
        return len(self.blend)

    def phase_of(self, k: int) -> Phase:
        return self.recipe.phases[self.blend.phase_of(int(k))]

    def phase_at_step(self, step: int) -> Phase:
        """The phase of optimizer step ``step`` (steps of the recipe's global batch, from 0; a step past the
        end, as a loader with a smaller batch counts them, is in the last phase)."""
        if int(step) < 0:
            raise ConfigError(f"step {step}: steps count from 0 (the recipe has {self.recipe.total_steps:,})")
        starts = self.recipe.start_steps()
        i = max(j for j, s in enumerate(starts) if s <= int(step))
        return self.recipe.phases[i]

    def step_of(self, k: int) -> int:
        """The optimizer step (of the recipe's per-phase global batches) that serves sample ``k``."""
        i = self.blend.phase_of(int(k))
        phase = self.recipe.phases[i]
        return self.recipe.start_steps()[i] + (int(k) - self.blend.starts[i]) // self.recipe.phase_global_batch(phase)

    def batch_at(self, k: int) -> int:
        """Samples per rank per step of the phase holding sample ``k`` (the recipe's, or the phase's own)."""
        return self.phase_of(min(int(k), len(self) - 1)).batch or self.recipe.batch

    def source_of(self, k: int) -> str:
        return self.source_of_component[self.names[self.blend.route(int(k))[0]]]

    def pieces(self, k: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """(component, documents of its corpus, start inside each, lengths) of sample ``k``."""
        c, j = self.blend.route(int(k))
        d, passes = self.datasets[c], self.passes.get(c)
        docs, starts, lens = passes.pieces(c, j) if passes else d.pieces(j % len(d))
        return c, docs, starts, lens

    def fresh_samples(self, c: int) -> int | None:
        """Samples component ``c`` gives before one of them reads its source a second time (None: none does)."""
        passes = self.passes.get(c)
        if passes is None:
            return len(self.datasets[c])
        first = passes.first_repeat()
        return first[1] if first and first[0] == c else None

    def __getitem__(self, k) -> dict:
        c = self.blend.route(int(k))[0] if 0 <= k < len(self) else None
        if c in self.passes:
            _, docs, starts, lens = self.pieces(k)
            sample = packed_sample(self.datasets[c].corpus, docs, starts, lens)
        else:
            sample = self.blend[k]
        if self.phase_of(k).ignore_loss_mask:  # this phase trains every token: masks and weights dropped
            sample = {**sample, "loss_mask": np.ones_like(sample["loss_mask"])}
            sample.pop("loss_weights", None)
        return sample

    def sample_tokens(self, k: int) -> tuple[str, int]:
        """(source, real tokens) of sample ``k``, from the packing plan."""
        c, j = self.blend.route(int(k))
        return self.source_of_component[self.names[c]], int(self.component_tokens(c, j, j + 1))

    def component_tokens(self, c: int, lo: int, hi: int) -> int:
        """Real tokens of component ``c``'s samples ``[lo, hi)`` (indices before wrapping), this epoch."""
        d = self.datasets[c]
        if hi <= lo:
            return 0
        if c in self.passes:
            return self.passes[c].tokens(c, lo, hi)
        if d.mode == "concat":
            return (hi - lo) * d.seq_len
        per_entry = self._pack_tokens.get(c)
        if per_entry is None:
            per_entry = self._pack_tokens[c] = d.plan.pack_lengths().astype(np.int64)
        n, total = len(d), 0
        for a in range(lo, hi, 1 << 20):  # chunks bound memory for long runs
            idx = np.arange(a, min(hi, a + (1 << 20)), dtype=np.int64) % n
            entries = permute(idx, n, seed=epoch_seed(d.seed, d.epoch)) if d.shuffle else idx
            total += int(per_entry[entries].sum())
        return total

    def validation(self, phase: str) -> dict[str, PackedDataset]:
        """The validation split (``DIR/val``) of each source the phase ``phase`` draws, at its seq_len, in order.

        Evaluate each and log the loss with ``RunLog.validation``; sources without a split are left out.
        """
        found = [p for p in self.recipe.phases if p.name == phase]
        if not found:
            raise ConfigError(f"no phase {phase!r}; the recipe has {[p.name for p in self.recipe.phases]}")
        out = {}
        for name, w in found[0].weights:
            source = self.recipe.source(name)
            val = val_directory(readable(source.path)) if w > 0 else None  # an s3:// source: its local copy
            if val is not None and shard_headers(val):  # a tiny split may hold no shard at all
                out[name] = open_source(source, found[0].seq_len, seed=self.seed, directory=val)
        return out


def _tokens(dataset: PackedDataset) -> int:
    return int(dataset.corpus.lengths.astype(np.int64).sum())
