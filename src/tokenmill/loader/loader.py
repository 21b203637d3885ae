"""``PackedLoader``: a DataLoader over one rank's share of the global order, resumable exactly.

The global order of an epoch is fixed by (seed, epoch) (see :mod:`tokenmill.loader.order`). This rank
reads positions ``cursor + rank + world_size * i``; every step of every rank consumes ``batch_size``
of them, so after ``t`` steps the cursor is ``cursor + t * batch_size * world_size``. The cursor counts
batches handed to the caller (not batches prefetched by workers), so ``state_dict()`` taken between
steps resumes at the next unseen sample, with any number of ranks or workers. Each rank drops the
epoch's tail that cannot fill one more step on every rank (ranks stay in lockstep).

A recipe whose phases set their own ``batch`` is served with each phase's batch (``batch_size=None``): a step
takes the batch of the phase its first sample lies in, so the cursor still counts samples and a resume at
any step of any phase needs nothing more.
"""

from __future__ import annotations

from tokenmill._extras import require
from tokenmill.errors import ConfigError, ShardError
from tokenmill.loader.collate import PackedCollator
from tokenmill.loader.order import partition
from tokenmill.loader.recipe_data import RecipeDataset
from tokenmill.loader.runlog import RunLog


class PackedLoader:
    """Iterate batches of ``dataset`` for ``rank`` of ``world_size``; one ``iter()`` = rest of an epoch."""

    def __init__(self, dataset, *, batch_size: int | None, collate_fn, rank: int = 0, world_size: int = 1,
                 num_workers: int = 0, pin_memory: bool = False):
        if batch_size is None and not hasattr(dataset, "batch_at"):
            raise ConfigError("batch_size=None (each phase's own batch) needs a RecipeDataset; give batch_size")
        if (batch_size is not None and batch_size < 1) or not 0 <= rank < world_size:
            raise ConfigError(f"need batch_size >= 1 and 0 <= rank < world_size; got {batch_size}, {rank}, {world_size}")
        self.dataset, self.batch_size, self.collate_fn = dataset, batch_size, collate_fn
        self.rank, self.world_size, self.num_workers, self.pin_memory = rank, world_size, num_workers, pin_memory
        self.epoch, self.cursor = dataset.epoch, 0
        self.run_log = None  # a RunLog (from_recipe with log_dir=): one line per batch handed out

    @classmethod
    def from_recipe(cls, recipe, *, batch_size: int | None = None, rank: int = 0, world_size: int | None = None,
                    collate_fn=None, log_dir=None, tokenizer=None, num_workers: int = 0, pin_memory: bool = False):
        """A loader drawing exactly what ``tokenmill plan RECIPE`` says (a path or a parsed ``Recipe``).

        ``batch_size`` and ``world_size`` default to the recipe's (each phase's own ``batch`` where it sets one);
        other values resume the same global order
        (phase boundaries stay at the recipe's steps when ``batch_size x world_size`` divides its global
        batch). ``collate_fn`` defaults to ``PackedCollator(pad_id=dataset.pad_id)``; ``log_dir`` writes the
        consumed-token log that ``tokenmill plan RECIPE --check LOG_DIR`` compares with the plan.
        """
        dataset = RecipeDataset(recipe, tokenizer=tokenizer)
        own = any(p.batch is not None for p in dataset.recipe.phases)
        batch_size = (None if own else dataset.recipe.batch) if batch_size is None else batch_size
        loader = cls(dataset, batch_size=batch_size, rank=rank,
                     world_size=dataset.recipe.world_size if world_size is None else world_size,
                     num_workers=num_workers, pin_memory=pin_memory,
                     collate_fn=collate_fn or PackedCollator(pad_id=dataset.pad_id))
        loader.run_log = RunLog(log_dir, rank=rank, dataset=dataset) if log_dir is not None else None
        return loader

    vocab_size = property(lambda self: self.dataset.vocab_size)
    pad_id = property(lambda self: self.dataset.pad_id)
    eos_id = property(lambda self: self.dataset.eos_id)
    tokenizer_fingerprint = property(lambda self: self.dataset.tokenizer_fingerprint)

    def steps_left(self) -> int:
        """Steps (batches per rank) left in the current epoch."""
        if self.batch_size is not None:
            return max(0, (len(self.dataset) - self.cursor) // (self.batch_size * self.world_size))
        return sum(1 for _ in self._steps())

    def _steps(self):
        """``(first global position, samples per rank)`` of every step left in the epoch, in order."""
        n, cursor = len(self.dataset), self.cursor
        while True:
            size = self.batch_size or self.dataset.batch_at(cursor)
            if cursor + size * self.world_size > n:
                return
            yield cursor, size
            cursor += size * self.world_size

    def __len__(self) -> int:
        return self.steps_left()

    def __iter__(self):
        torch = require("torch", "torch", "iterate packed batches")
        if self.batch_size is None:  # each phase's own batch: one list of positions per step
            batches = ([first + self.rank + self.world_size * i for i in range(size)] for first, size in self._steps())
            loader = torch.utils.data.DataLoader(self.dataset, batch_sampler=batches, collate_fn=self.collate_fn,
                                                 num_workers=self.num_workers, pin_memory=self.pin_memory)
        else:
            end = self.cursor + self.steps_left() * self.batch_size * self.world_size
            positions = partition(end, rank=self.rank, world_size=self.world_size, start=self.cursor)  # a range
            loader = torch.utils.data.DataLoader(
                self.dataset, batch_size=self.batch_size, sampler=positions, collate_fn=self.collate_fn,
                num_workers=self.num_workers, pin_memory=self.pin_memory, drop_last=True)
        if self.run_log is not None:
            self.run_log.start(world_size=self.world_size, batch_size=self.batch_size, cursor=self.cursor)
        for batch, (first, size) in zip(loader, self._steps()):
            if self.run_log is not None:
                self.run_log.step(first=first + self.rank, stride=self.world_size, count=size,
                                  global_batch=size * self.world_size,
                                  step=None if self.batch_size else self.dataset.step_of(first))
            self.cursor = first + size * self.world_size
            yield batch
        self.set_epoch(self.epoch + 1)

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its first sample (re-plans and re-shuffles the dataset)."""
        self.epoch, self.cursor = int(epoch), 0
        self.dataset.set_epoch(self.epoch)

    def state_dict(self) -> dict:
        """Epoch, seed, global samples consumed and the data fingerprint: all that resuming needs."""
        return {"epoch": self.epoch, "seed": self.dataset.seed, "cursor": self.cursor,
                "fingerprint": self.dataset.fingerprint, "n_samples": len(self.dataset)}

    def load_state_dict(self, state: dict) -> None:
        """Resume at ``state``; refuses a state taken over other data or another seed."""
        if state["fingerprint"] != self.dataset.fingerprint:
            raise ShardError(
                f"loader state was saved over data {state['fingerprint']}, but this dataset is "
                f"{self.dataset.fingerprint}; resume with the same shards (and tokenizer)"
            )
        if state["seed"] != self.dataset.seed:
            raise ConfigError(f"loader state has seed {state['seed']}, the dataset seed {self.dataset.seed}; "
                              "build the dataset with the saved seed")
        self.set_epoch(state["epoch"])
        self.cursor = int(state["cursor"])
