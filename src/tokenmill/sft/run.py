"""``tokenmill sft``: route, normalise, validate, render with the chat template, mask, write shards.

Per work unit (in a worker process): raw batches -> canonical ``Conversation`` dicts (rejects on the way)
-> strict validation -> one render + one tokenization with the loss mask (turn-aware truncation past
``max_length``) -> ``ShardWriter`` with the mask. The first ``verify`` examples of every unit are checked
against ``transformers``' ``apply_chat_template``; a mismatch stops the run naming the example.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from tokenmill.errors import TemplateError
from tokenmill.io import read_unit
from tokenmill.io.base import WorkUnit
from tokenmill.report.accounting import Reject, Stats
from tokenmill.report.rejects import RejectSink
from tokenmill.selection import dry_run_plan, take_records
from tokenmill.sft.normalize import normalize_rows
from tokenmill.sft.render import MaskPolicy
from tokenmill.sft.report import example_report, merge, summarize
from tokenmill.sft.template import ChatTemplate, load_template
from tokenmill.sft.truncate import fit_conversations
from tokenmill.shards import ShardWriter
from tokenmill.track import finish_run, prepare_run


@dataclass(frozen=True)
class SftOptions:
    max_length: int | None = None
    train_on: str = "assistant"
    train_reasoning: bool = True
    supervise_empty_think: bool = False
    reasoning_policy: str = "inline"
    allow_consecutive: bool = False
    verify: int = 16  # examples per unit checked against apply_chat_template; 0 = off

    @property
    def policy(self) -> MaskPolicy:
        """The masking options as one :class:`MaskPolicy` (validated)."""
        return MaskPolicy(self.train_on, self.train_reasoning, self.supervise_empty_think, self.reasoning_policy)


@dataclass(frozen=True)
class SftTask:
    """Everything one worker needs to turn one unit of conversations into masked shards. Picklable."""

    tokenizer: Any
    template: ChatTemplate
    schemas: dict[str, dict]
    options: SftOptions
    shard_tokens: int = 1 << 28
    batch_rows: int = 1024
    limit: int | None = None  # first records of every input only (a trial run)

    def __call__(self, unit: WorkUnit, staging: Path) -> dict:
        stats, report = Stats(), {"parity": {"checked": 0, "exempt": 0}}
        writer = ShardWriter(staging, stem_prefix=f"shard-{unit.index:06d}", with_mask=True,
                             tokenizer_info=self.tokenizer.info(chat_template=self.template.source),
                             max_tokens=self.shard_tokens)
        sink = RejectSink(staging, unit)
        oracle, unavailable = _oracle(self.tokenizer) if self.options.verify else (None, "")
        schema = self.schemas.get(unit.file.rel, {})
        for raw in take_records(read_unit(unit, batch_rows=self.batch_rows), self.limit):
            stats.input += len(raw) + len(raw.rejects)
            stats.bytes_in += raw.nbytes
            sink.add(raw.rejects, stats)
            convs, rejects = normalize_rows(raw.to_rows(), raw.locs, source=raw.source, schema=schema,
                                            allow_consecutive=self.options.allow_consecutive)
            sink.add(rejects, stats)
            bad = {r.loc for r in rejects}
            locs = [loc for loc in raw.locs if loc not in bad]
            for conv, loc, rendered in zip(convs, locs, self._render(convs)):
                if isinstance(rendered, TemplateError):
                    reason = getattr(rendered, "reason", "template_error")
                    sink.add([Reject(raw.source, loc, reason, str(rendered), raw=conv)], stats)
                    continue
                if oracle is not None and report["parity"]["checked"] + report["parity"]["exempt"] < self.options.verify:
                    self._verify(conv, rendered, oracle, report)
                writer.add(rendered.ids, mask=rendered.mask, rec_id=rendered.id, source=raw.source)
                stats.kept += 1
                stats.tokens += len(rendered.ids)
                report = merge(report, example_report(rendered.stats))
        shards = writer.close()
        sink.close()
        return {"stats": stats.to_dict(), "shards": shards, "report": report, "parity_unavailable": unavailable}

    def _render(self, convs: list[dict]) -> list:
        """Rendered examples, or the TemplateError of each conversation that cannot be rendered."""
        return fit_conversations(
            convs, max_length=self.options.max_length or 1 << 40, tokenizer=self.tokenizer,
            template=self.template, policy=self.options.policy,
        )

    def _verify(self, conv: dict, rendered: Any, oracle: Any, report: dict) -> None:
        from tokenmill.sft.parity import check_parity

        note = check_parity(conv, rendered, oracle, self.template)
        report["parity"]["exempt" if note else "checked"] += 1


_ORACLES: dict[str, Any] = {}


def _oracle(tokenizer: Any) -> tuple[Any, str]:
    """(transformers reference, "") for this tokenizer, built once per process; (None, why) when not possible."""
    key = tokenizer.fingerprint
    if key not in _ORACLES:
        from tokenmill.sft.oracle import hf_oracle

        _ORACLES[key] = hf_oracle(tokenizer)
    return _ORACLES[key]


def _summarize(results: list[dict]) -> dict:
    """The merged report of all units, noting why parity was not checked when no reference could be built."""
    report = summarize([r["report"] for r in results])
    why = next((r["parity_unavailable"] for r in results if r.get("parity_unavailable")), "")
    if why:
        report.setdefault("parity", {})["unavailable"] = why
    return report


def resolve_template(spec: str | None, tokenizer: Any) -> ChatTemplate:
    """An explicit template, else the tokenizer's own, else the built-in ChatML."""
    if spec:
        return load_template(spec)
    return load_template(tokenizer if getattr(tokenizer, "chat_template", None) else None)


def run_sft(
    inputs: Sequence[str],
    *,
    out: str | Path,
    tokenizer: Any = "default",
    chat_template: str | None = None,
    workers: int | None = None,
    force: bool = False,
    overwrite: bool = False,
    unit_bytes: int = 64 << 20,
    shard_tokens: int = 1 << 28,
    seq_len: int | None = None,
    progress: bool | None = None,
    schemas: dict[str, dict] | None = None,
    exclude: Sequence[str] = (),
    skip_misrouted: bool = False,
    limit: int | None = None,
    dry_run: bool = False,
    **options: Any,
) -> dict:
    """Run the SFT track end to end; return the manifest (also written to ``out/manifest.json``).

    ``exclude``, ``skip_misrouted``, ``limit`` and ``dry_run``: see :mod:`tokenmill.selection`; a dry run
    returns the plan and writes nothing.
    """
    opts = SftOptions(**options)
    opts.policy  # noqa: B018 -- validates the masking options before any work starts
    run = prepare_run("sft", inputs, out=out, tokenizer=tokenizer, force=force, unit_bytes=unit_bytes,
                      text_mode="auto", config=None, schemas=schemas, exclude=exclude,
                      skip_misrouted=skip_misrouted, limit=limit)
    template = resolve_template(chat_template, run.tokenizer)
    run.config.update({"sft": opts.__dict__, "chat_template": template.origin,
                       "chat_template_hash": template.digest, "shard_tokens": shard_tokens})
    if dry_run:
        return {**dry_run_plan(run), "chat_template": template.origin}
    if opts.verify:
        _check_oracle(run.tokenizer)
    task = SftTask(run.tokenizer, template, run.schemas, opts, shard_tokens=shard_tokens, limit=limit)
    manifest = finish_run(run, task, workers=workers, overwrite=overwrite, progress=progress,
                          summarize=_summarize,
                          chat_template=template.source)
    if seq_len:
        _add_packing(manifest, run.out, seq_len)
    return manifest


def _check_oracle(tokenizer: Any) -> None:
    """Fail before any work when verification is asked for but transformers is missing."""
    from tokenmill._extras import require

    require("transformers", "hf", "verify token parity (pass --verify 0 to skip)")


def _add_packing(manifest: dict, out: Path, seq_len: int) -> None:
    """The best-fit-decreasing plan of the written examples at ``seq_len``, added to the saved manifest."""
    from tokenmill.pack import best_fit_decreasing
    from tokenmill.report.manifest import write_manifest
    from tokenmill.shards import open_shards

    plan = best_fit_decreasing(open_shards(out).lengths, seq_len)
    manifest["report"]["packing"] = {"seq_len": seq_len, "n_packs": int(plan.n_packs),
                                     "efficiency": round(float(plan.efficiency), 6), "dropped": int(plan.dropped)}
    write_manifest(out, manifest)
