"""``tokenmill pretrain``: route, read, tokenize, write token shards, account for every record.

Per work unit (in a worker process): read raw batches -> ``Document`` batches -> curation steps ->
``encode_batch`` (no special tokens; literal special-token strings stay text) -> ``[BOS] + ids + [EOS]``
(BOS only when the tokenizer's own config adds one) -> ``ShardWriter``. Shards are named after the unit,
so the output is the same whatever the number of workers or the executor.

Steps (document steps, and plain callables through :func:`tokenmill.steps.plain.as_doc_step`) run as one
cascade through :class:`tokenmill.steps.ledger.UnitLedger`, which writes each unit's ledger part; they get
``setup()`` once per worker through the task's own ``setup``, and enter the run's fingerprint by name, version,
parameters and (a step from outside tokenmill) package version, never ``repr``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from tokenmill._arrow import skip_pandas_probe
from tokenmill.base.accounting import Stats
from tokenmill.curate.workflows.track import STAGE, funnel_section
from tokenmill.engine.outputs import Shards
from tokenmill.engine.stage import Unit, UnitResult
from tokenmill.errors import ConfigError, TokenizerError
from tokenmill.io import read_unit
from tokenmill.io.documents import to_documents
from tokenmill.job.options import JobOptions
from tokenmill.job.run import Job, Results, Run
from tokenmill.job.run import run as run_job
from tokenmill.report.rejects import RejectSink
from tokenmill.selection import count_sources, file_counts
from tokenmill.shards import ShardWriter
from tokenmill.split import SplitWriters, ValSplit, make_split
from tokenmill.steps.cascade import Cascade
from tokenmill.steps.contract import AnyStep, CorpusStep, DocStep, Step, is_corpus_step, step_identity, step_packages
from tokenmill.steps.ledger import UnitLedger
from tokenmill.steps.plain import as_doc_step
from tokenmill.track import shards_report, staged_files, token_warm, track_stages

if TYPE_CHECKING:
    import pyarrow as pa

    from tokenmill.engine.workflow import Executor
    from tokenmill.tokenize.sources import TokenizerSpec
    from tokenmill.tokenize.tokenizer import Tokenizer


def frame(flat: np.ndarray, offsets: np.ndarray, *, bos: int | None, eos: int) -> tuple[np.ndarray, np.ndarray]:
    """Insert an optional BOS before and an EOS after every document of a flat id array.

    One slice copy per document into a preallocated array: no per-token index arrays, so the extra
    memory is the output itself (4 bytes per token), not several int64 temporaries.
    """
    n = len(offsets) - 1
    lead = 0 if bos is None else 1
    new_offsets = offsets + np.arange(n + 1, dtype=np.int64) * (lead + 1)
    out = np.empty(int(new_offsets[-1]), dtype=np.uint32)
    for i in range(n):
        a, b, at = int(offsets[i]), int(offsets[i + 1]), int(new_offsets[i])
        out[at + lead : at + lead + b - a] = flat[a:b]
    if bos is not None:
        out[new_offsets[:-1]] = bos
    out[new_offsets[1:] - 1] = eos
    return out, new_offsets


@dataclass(frozen=True)
class PretrainTask:
    """Everything one worker needs to turn one unit into shards. Picklable."""

    output: ClassVar[type] = Shards  # what its units hand on, checked at commit (engine/outputs.py)

    tokenizer: Tokenizer
    schemas: dict[str, dict]  # InputFile.rel -> router schema
    shard_tokens: int = 1 << 28
    text_mode: str = "auto"
    batch_rows: int = 512
    steps: Sequence[Step] = field(default_factory=tuple)  # document steps (plain callables wrapped; no corpus step)
    limit: int | None = None  # first records of every input only (a trial run)
    split: ValSplit | None = None  # validation split (tokenmill.split): val/ shards beside the training ones

    def setup(self) -> None:
        """Once per worker, before its first unit: the steps' own ``setup()`` (load a model)."""
        Cascade(tuple(self.steps)).setup()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        skip_pandas_probe()  # a pool worker never needs pyarrow to import pandas
        work, tok = unit.payload, self.tokenizer
        stats, seconds, origins = Stats(), Counter(), {}
        info = tok.info(chat_template="")  # pretraining shards name no chat template (shard spec)
        out = SplitWriters(self.split, staging, lambda where: ShardWriter(
            where, stem_prefix=f"shard-{work.index:06d}", tokenizer_info=info, max_tokens=self.shard_tokens))
        sink = RejectSink(staging, work)
        bos = tok.bos_id if tok.add_bos else None
        # the steps run as one cascade that writes the unit's ledger part beside the shards
        ledger = UnitLedger(Cascade(tuple(self.steps)), staging, STAGE, unit.name) if self.steps else None
        sources = file_counts(work)  # a unit of packed files: the manifest's counts of each
        batches = read_unit(work, batch_rows=self.batch_rows, text_mode=self.text_mode, limit=self.limit)
        for raw in count_sources(batches, stats, sources):
            stats.input += len(raw) + len(raw.rejects)
            stats.bytes_in += raw.nbytes
            stats.extra.update({f"skipped:{k}": v for k, v in raw.skipped.items()})
            sink.add(raw.rejects, stats)
            docs, rejects = to_documents(raw, self.schemas.get(raw.source, {}))
            sink.add(rejects, stats)
            if ledger is not None:
                docs = ledger.apply(docs, raw, rejects, stats)
            if docs.num_rows == 0:
                continue
            stats.kept += docs.num_rows
            if out.ranking:
                out.rank(docs)  # the first pass of a --val-count split: keys only, nothing encoded
                continue
            for target, part in out.route(docs):
                tokens = self._encode_into(target, part, bos, seconds, origins if self._origins(raw.source) else None)
                stats.tokens += tokens
                out.count(target, part.num_rows, tokens)
        sink.close()
        ledger_file = ledger.close() if ledger else None
        seconds.update(ledger.seconds if ledger else {})
        data = {**out.close(), "ledger": ledger_file}  # closed first: the outputs are the final file names
        if origins:
            data["origins"] = origins
        if work.packed:
            data["sources"] = sources
        return UnitResult(stats=stats, outputs=staged_files(staging), step_seconds=seconds, data=data)

    def _origins(self, source: str) -> bool:
        """Whether an input's documents carry their own origin (a tokenmill documents file: ``source`` mapped)."""
        return bool(self.schemas.get(source, {}).get("source"))

    def _encode_into(self, writer: ShardWriter, docs: pa.RecordBatch, bos: int | None, seconds: Counter,
                     origins: dict[str, dict[str, int]] | None = None) -> int:
        """Encode a Document batch and append it to ``writer``; the number of tokens written. ``origins``, when
        given, gets each document's origin's kept documents and tokens."""
        tok = self.tokenizer
        started = time.perf_counter()
        flat, offsets = tok.encode_batch(docs.column("text"))  # Arrow buffers, no Python strings
        flat, offsets = frame(flat, offsets, bos=bos, eos=_check_eos(tok))
        seconds["tokenize"] += time.perf_counter() - started  # pyright: ignore[reportArgumentType] (typeshed's Counter counts ints; seconds add as floats)
        sources = docs.column("source").to_pylist()
        writer.add_many(flat, offsets, rec_ids=docs.column("id").to_pylist(), sources=sources)
        if origins is not None:
            for source, n in zip(sources, np.diff(offsets).tolist()):
                row = origins.setdefault(source, {"kept": 0, "tokens": 0})
                row["kept"] += 1
                row["tokens"] += n
        return int(offsets[-1])


def run_pretrain(
    inputs: Sequence[str],
    *,
    out: str | Path,
    tokenizer: TokenizerSpec | Tokenizer = "default",
    workers: int | None = None,
    executor: Executor | None = None,
    force: bool = False,
    overwrite: bool = False,
    unit_bytes: int | None = None,
    shard_tokens: int = 1 << 28,
    text_mode: str = "auto",
    steps: Sequence[AnyStep] = (),
    progress: bool | None = None,
    schemas: dict[str, dict] | None = None,
    config: dict | None = None,
    exclude: Sequence[str] = (),
    skip_misrouted: bool = False,
    limit: int | None = None,
    dry_run: bool = False,
    val_fraction: float | None = None,
    val_count: int | None = None,
    val_seed: int = 0,
    eos: str | None = None,
) -> dict:
    """Run the pretraining track end to end; return the manifest (also written to ``out/manifest.json``).

    ``eos``: the token appended after every document, checked against the vocabulary before any work (default:
    the tokenizer's own EOS, or its document token when that EOS is a chat end-of-turn token: see
    :func:`choose_eos`); the summary names it.

    ``executor`` runs the units (default: a local pool of ``workers`` processes, all cores when None).
    ``exclude``, ``skip_misrouted``, ``limit`` and ``dry_run``: see :mod:`tokenmill.selection`; a dry run
    returns the plan and writes nothing. ``val_fraction`` or ``val_count`` (with ``val_seed``) split whole
    documents off into ``out/val/``: see :mod:`tokenmill.split`. The run itself is :func:`tokenmill.job.run`
    of :func:`pretrain_job`.
    """
    options = JobOptions(workers=workers, force=force, overwrite=overwrite, unit_bytes=unit_bytes, text_mode=text_mode,
                         exclude=tuple(exclude), skip_misrouted=skip_misrouted, limit=limit, dry_run=dry_run,
                         no_progress=progress is False)
    job = pretrain_job(steps=steps, shard_tokens=shard_tokens, eos=eos, config=config,
                       split=make_split(val_fraction=val_fraction, val_count=val_count, val_seed=val_seed))
    return run_job(job, inputs, out=out, options=options, executor=executor, tokenizer=tokenizer, schemas=schemas)


def pretrain_job(*, steps: Sequence[AnyStep] = (), shard_tokens: int = 1 << 28, eos: str | None = None,
                 config: dict | None = None, split: ValSplit | None = None) -> Job:
    """The ``pretrain`` job: documents in, token shards out (one ``shards`` stage, after a ``val_rank`` stage
    for a ``--val-count`` split); ``config``: entries the command adds to the manifest's (step specs, preset)."""
    _check_steps(steps)
    doc_steps = tuple(as_doc_step(s) for s in steps)  # one cascade: every step's removals reach the ledger
    ledgered = bool(doc_steps)

    def configure(run: Run) -> PretrainTask:
        run.config.update({"steps": [step_identity(s) for s in steps], **(config or {}), "shard_tokens": shard_tokens,
                           **({"val_split": split.describe()} if split else {}), **step_packages(steps)})
        run.tokenizer, run.config["eos"] = choose_eos(run.loaded_tokenizer, eos)
        return PretrainTask(tokenizer=run.tokenizer, schemas=run.inputs.schemas, shard_tokens=shard_tokens,
                            text_mode=run.options.text_mode, steps=doc_steps, limit=run.options.limit, split=split)

    def report(run: Run, results: Results, manifest: dict) -> dict:
        section = shards_report(run, results, manifest, chat_template="")
        if ledgered:
            section.update(funnel_section(run.out, {**manifest, **section}, doc_steps, [u.name for u in run.inputs.units]))
        return section

    return Job("pretrain", "pretrain", lambda run: track_stages(run, run.plan), report, configure=configure,
               tokenizer=True, warm=token_warm("pretrain"), pull=lambda run: ("steps/",) if ledgered else (),
               publish="units")


def _check_steps(steps: Sequence[AnyStep]) -> None:
    """Refuse, before any work, what is not a step: a step is a callable over a Document batch or has
    ``score``/``decide`` (step specs given as dicts go through ``tokenmill.steps.build.build_steps``)."""
    problems = [f"steps[{i}]: expected a step, got {type(s).__name__}"
                + (" (a step spec: build it with tokenmill.steps.build.build_steps)" if isinstance(s, dict) else "")
                for i, s in enumerate(steps) if not isinstance(s, (DocStep, CorpusStep)) and not callable(s)]
    problems += [f"steps[{i}]: {s.name} is a corpus step (it decides after seeing every document), which the "
                 "pretraining pass cannot run; curate first (`tokenmill curate INPUT... --out DIR` with the same "
                 "steps or preset), then tokenize DIR/documents with `tokenmill pretrain`"
                 for i, s in enumerate(steps) if is_corpus_step(s)]
    if problems:
        raise ConfigError(problems)


CHAT_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|eom_id|>", "<|END_OF_TURN_TOKEN|>")
DOCUMENT_EOS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>")


def choose_eos(tokenizer: Tokenizer, given: str | None) -> tuple[Tokenizer, dict]:
    """The tokenizer whose EOS ends every document, and what the manifest says of it (``config.eos``).

    ``given`` (``--eos``) wins, checked against the vocabulary. Otherwise the tokenizer's own EOS, except a chat
    end-of-turn token (an instruct tokenizer's ``<|im_end|>``) when the vocabulary holds a document token
    (``<|endoftext|>``): a base model taught to end documents with the chat stop token stops mid-answer and
    chats where it should continue, and the user who took the instruct model's tokenizer did not ask for that.
    """
    tokenizer_eos = tokenizer.eos_token
    document = None if given is not None or tokenizer_eos not in CHAT_END_OF_TURN else document_eos(tokenizer)
    token = given if given is not None else document
    if token is not None:
        tokenizer = tokenizer.with_eos(token)
    _check_eos(tokenizer)
    note = eos_note(tokenizer, given=given is not None)
    if document is not None:
        note["tokenizer_eos"] = tokenizer_eos
        note["warning"] = (f"the tokenizer's EOS {tokenizer_eos!r} is a chat end-of-turn token: documents end with "
                           f"its document token {document!r} instead (--eos {tokenizer_eos!r} keeps the chat token)")
    return tokenizer, note


def document_eos(tokenizer: Tokenizer) -> str | None:
    """The vocabulary's end-of-document token (``<|endoftext|>``, ``<|end_of_text|>``, ``</s>``, ``<eos>``)."""
    return next((t for t in DOCUMENT_EOS if tokenizer.token_to_id(t) is not None), None)


def eos_note(tokenizer: Tokenizer, *, given: bool) -> dict:
    """What is appended to every document (``config.eos`` of the manifest), with a warning when the EOS is a
    chat end-of-turn token the user did not choose and the vocabulary has no document token to put instead."""
    note = {"token": tokenizer.eos_token, "id": tokenizer.eos_id, "given": given}
    if not given and tokenizer.eos_token in CHAT_END_OF_TURN:
        note["warning"] = (f"the tokenizer's EOS {tokenizer.eos_token!r} is a chat end-of-turn token, appended after "
                           "every document, and its vocabulary holds no document token (<|endoftext|>, </s> ...); "
                           "pass --eos TOKEN (pipeline file: eos) if documents should end with another token")
    return note


def _check_eos(tokenizer: Tokenizer) -> int:
    """Every document ends with EOS: its id; refuse, before any work, a tokenizer that names none."""
    if tokenizer.eos_id is None:
        raise TokenizerError(
            f"tokenizer {tokenizer.name!r} names no end-of-sequence token, which the pretraining track puts after "
            "every document; give the model's tokenizer directory (with its tokenizer_config.json naming "
            "eos_token) instead of a bare tokenizer file"
        )
    return tokenizer.eos_id
