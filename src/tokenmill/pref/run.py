"""``tokenmill pref``: preference pairs (DPO, reward) and KTO records into token shards, tokenized as TRL does.

Per work unit (in a worker process): raw batches -> :class:`~tokenmill.pref.inputs.Pair` (rejects with file, line
and reason) -> the checks (:mod:`tokenmill.pref.checks`: identical, empty, whitespace-only completions; the
``--min-margin`` filter) -> TRL's tokenization with the SFT track's mask (:mod:`tokenmill.pref.tokenize`) ->
truncation -> shards. A pair is three documents in a row of the one shard format: its prompt (stored once,
never trained), its chosen and its rejected completion, with record ids ``<id>/prompt``, ``<id>/chosen``,
``<id>/rejected`` (a KTO record: ``<id>/prompt`` and ``<id>/desirable`` or ``<id>/undesirable``); each
completion's mask is its loss mask. :class:`~tokenmill.pref.dataset.PreferenceDataset` reads them back.

The run is a :class:`~tokenmill.job.run.Job` of the one driver: the same job flags, guard, resume, manifest
envelope and data card as ``tokenmill sft``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tokenmill._arrow import skip_pandas_probe
from tokenmill.base.accounting import Reject, Stats
from tokenmill.engine.outputs import Shards, as_data
from tokenmill.engine.stage import Unit, UnitResult
from tokenmill.io import read_unit
from tokenmill.job.options import JobOptions
from tokenmill.job.run import Job, Results, Run
from tokenmill.job.run import run as run_job
from tokenmill.pref.checks import Summary, margin_decision, pair_problem, truncate
from tokenmill.pref.inputs import Pair, read_pairs
from tokenmill.pref.tokenize import PairProblem, Tokenized, tokenize_pairs
from tokenmill.report.rejects import RejectSink
from tokenmill.sft.options import PrefOptions
from tokenmill.sft.render import check_stop_token
from tokenmill.sft.run import resolve_template
from tokenmill.sft.template import ChatTemplate
from tokenmill.shards import ShardWriter
from tokenmill.track import print_summary, shards_report, staged_files, track_stages

if TYPE_CHECKING:
    from tokenmill.engine.workflow import Executor
    from tokenmill.split import ValSplit
    from tokenmill.tokenize.sources import TokenizerSpec
    from tokenmill.tokenize.tokenizer import Tokenizer

ROLES = ("prompt", "chosen", "rejected", "desirable", "undesirable")  # the record-id suffixes of a pair's documents


@dataclass(frozen=True)
class PrefTask:
    """Everything one worker needs to turn one unit of preference records into shards. Picklable."""

    output: ClassVar[type] = Shards  # what its units hand on, checked at commit (engine/outputs.py)

    tokenizer: Tokenizer
    template: ChatTemplate
    schemas: dict[str, dict]
    options: PrefOptions
    shard_tokens: int = 1 << 28
    batch_rows: int = 512
    limit: int | None = None
    split: ValSplit | None = field(default=None)  # no validation split on this track (track_stages reads it)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        skip_pandas_probe()
        work = unit.payload
        stats, summary = Stats(), Summary()
        writer = ShardWriter(staging, stem_prefix=f"shard-{work.index:06d}", with_mask=True,
                             tokenizer_info=self.tokenizer.info(chat_template=self.template.source),
                             max_tokens=self.shard_tokens)
        sink = RejectSink(staging, work)
        for raw in read_unit(work, batch_rows=self.batch_rows, limit=self.limit):
            stats.input += len(raw) + len(raw.rejects)
            stats.bytes_in += raw.nbytes
            pairs, bad = read_pairs(raw.to_rows(), raw.locs, source=raw.source,
                                    schema=self.schemas.get(raw.source, {}))
            sink.add(raw.rejects, stats)
            sink.add(bad, stats)
            self._write(self._checked(pairs, raw.source, sink, stats), raw.source, writer, sink, stats, summary)
        sink.close()
        data = as_data(Shards(writer.close()), summary=summary.to_state())
        return UnitResult(stats=stats, outputs=staged_files(staging), data=data)

    def _checked(self, pairs: list[tuple[int, Pair]], source: str, sink: RejectSink, stats: Stats
                 ) -> list[tuple[int, Pair]]:
        """The pairs that pass the checks; the others rejected (or filtered by ``--min-margin``), counted."""
        kept = []
        for loc, pair in pairs:
            problem = pair_problem(pair)
            if problem is not None:
                sink.add([Reject(source, loc, problem[0], f"record {pair.id}: {problem[1]}", raw=_raw(pair))], stats)
                continue
            why = margin_decision(pair, self.options.min_margin)
            if why is not None:
                stats.filter(why)
                continue
            kept.append((loc, pair))
        return kept

    def _write(self, pairs: list[tuple[int, Pair]], source: str, writer: ShardWriter, sink: RejectSink, stats: Stats,
               summary: Summary) -> None:
        done = tokenize_pairs([p for _, p in pairs], tokenizer=self.tokenizer, template=self.template,
                              policy=self.options.policy)
        for (loc, pair), t in zip(pairs, done):
            if not isinstance(t, PairProblem):
                t = truncate(t, max_length=self.options.max_length, max_prompt_length=self.options.max_prompt_length)
            if isinstance(t, PairProblem):
                sink.add([Reject(source, loc, t.reason, f"record {pair.id}: {t.detail}", raw=_raw(pair))], stats)
                continue
            write_pair(writer, pair, t, source=source)
            stats.kept += 1
            stats.tokens += len(t.prompt_ids) + len(t.chosen_ids) + (0 if t.rejected_ids is None else len(t.rejected_ids))
            summary.add(pair, t)


def write_pair(writer: ShardWriter, pair: Pair, t: Tokenized, *, source: str) -> None:
    """One pair as consecutive documents: prompt (untrained), chosen, rejected (a KTO record: its completion
    under ``desirable`` or ``undesirable``)."""
    if t.rejected_ids is not None:
        docs = [("prompt", t.prompt_ids, None), ("chosen", t.chosen_ids, t.chosen_mask),
                ("rejected", t.rejected_ids, t.rejected_mask)]
    else:
        role = "desirable" if pair.label else "undesirable"
        docs = [("prompt", t.prompt_ids, None), (role, t.chosen_ids, t.chosen_mask)]
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(ids) for _, ids, _ in docs], out=offsets[1:])
    masks = [np.zeros(len(ids), dtype=bool) if mask is None else mask.astype(bool) for _, ids, mask in docs]
    writer.add_many(np.concatenate([ids for _, ids, _ in docs]).astype(np.uint32), offsets,
                    rec_ids=[f"{pair.id}/{role}" for role, _, _ in docs], sources=[source] * len(docs),
                    flat_mask=np.concatenate(masks))


def _raw(pair: Pair) -> dict:
    return {"id": pair.id, "prompt": pair.prompt, "chosen": pair.chosen, "rejected": pair.rejected,
            "label": pair.label}


def pref_job(opts: PrefOptions, *, chat_template: str | None = None, shard_tokens: int = 1 << 28) -> Job:
    """The ``pref`` job: preference records in, pair shards out (one ``shards`` stage over the input units)."""
    opts.policy  # noqa: B018 -- validates the masking options before any work starts

    def configure(run: Run) -> PrefTask:
        template = resolve_template(chat_template, run.loaded_tokenizer)
        check_stop_token(template, run.loaded_tokenizer, allow=opts.allow_untrained_stop)
        run.config.update({"pref": opts.fingerprinted(), "chat_template": template.origin,
                           "template_hash": template.digest, "shard_tokens": shard_tokens})
        return PrefTask(run.loaded_tokenizer, template, run.inputs.schemas, opts, shard_tokens=shard_tokens,
                        limit=run.options.limit)

    def stages(run: Run) -> list:
        return track_stages(run, run.plan)

    def report(run: Run, results: Results, manifest: dict) -> dict:
        def summarize(last: list[UnitResult], out: Path) -> dict:
            total = Summary()
            for r in last:
                total = total + Summary.from_state(r.data["summary"])
            return total.to_dict()

        section = shards_report(run, results, manifest, chat_template=run.plan.template.source, summarize=summarize)
        report = section["report"]
        section["documents"] = report["pairs"] * 3 + sum(report["unpaired"].values()) * 2  # what the shards hold
        return section

    return Job("pref", "preference", stages, report, configure=configure, tokenizer=True,
               describe=lambda run: {"chat_template": run.plan.template.origin})


def run_pref(inputs: Sequence[str], *, out: str | Path, tokenizer: TokenizerSpec | Tokenizer = "default",
             chat_template: str | None = None, shard_tokens: int = 1 << 28, options: JobOptions | None = None,
             executor: Executor | None = None,
             schemas: dict[str, dict] | None = None, **pref: Any) -> dict:
    """Run the preference track end to end; return the manifest (a dry run: the plan). ``pref``: the fields of
    :class:`PrefOptions`; ``options``: the job options (workers, limit, exclude, overwrite, dry run ...)."""
    job = pref_job(PrefOptions(chat_template=chat_template, **pref), chat_template=chat_template, shard_tokens=shard_tokens)
    return run_job(job, inputs, out=out, options=options or JobOptions(), executor=executor, tokenizer=tokenizer,
                   schemas=schemas)


def summary_lines(manifest: dict) -> list[str]:
    """The run's summary after the track's common lines: pairs, length bias, margins, what the prompt split did."""
    r = manifest.get("report") or {}
    bias, margin, cut = r.get("length_bias") or {}, r.get("margin") or {}, r.get("prompt_not_prefix") or {}
    lines = [f"pairs: {r.get('pairs', 0):,}" + (f", unpaired (KTO): {r['unpaired']}" if r.get("unpaired") else "")]
    if bias.get("chosen_longer_share") is not None:
        lines.append(f"length bias: chosen longer in {bias['chosen_longer_share']:.1%} of pairs, median "
                     f"chosen/rejected length ratio {bias['median_length_ratio']}")
    if margin.get("rated"):
        lines.append(f"margins: {margin['rated']:,} rated pairs, min {margin['min']:g}, median {margin['median']:g}, "
                     f"max {margin['max']:g}")
    tokens = r.get("tokens") or {}
    if tokens.get("stored"):
        lines.append(f"tokens: {tokens['stored']:,} stored ({tokens['trained']:,} trained); the prompt stored once "
                     f"saves {tokens['saved_share']:.1%}")
    if cut.get("pairs"):
        lines.append(f"warning: {cut['pairs']:,} pairs: the chat template renders the prompt alone differently from "
                     f"the prompt inside prompt+completion; the completion starts where they diverge (as in TRL) and "
                     f"the prompt's end {cut['example']!r} is left out of the training sequence")
    if r.get("truncated"):
        lines.append(f"truncated: {r['truncated']:,} pairs (prompt's end and completions' starts kept)")
    return lines


def print_pref_summary(manifest: dict, out: Any, stream: Any = None) -> None:
    """The track's common summary lines, then the pairs' (warnings to stderr)."""
    stream = stream or sys.stdout
    print_summary(manifest, out, stream=stream)
    for line in summary_lines(manifest):
        print(line, file=sys.stderr if line.startswith("warning:") else stream)
