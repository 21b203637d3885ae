"""``tokenmill synth rephrase``: WRAP-style rewriting of documents by a model behind an OpenAI-compatible server.

Each document is cut on paragraph boundaries (blank lines; a paragraph too long on its own is cut at
line, then sentence, then character boundaries) into pieces of at most ``chunk_chars`` characters, each
piece is rewritten with the style's prompt, and the rewrites are joined back with blank lines. A document
whose pieces do not all come back usable is dropped and counted by reason:

``synth_refusal``   the model declined (its answer begins like "I'm sorry", "I cannot", "As an AI")
``synth_empty``     an empty answer
``synth_truncated`` the answer was cut at the token limit (``finish_reason: length``)
``synth_malformed`` the server's answer was not a chat completion, or a 4xx other than 429

The output is ``DIR/documents/part-<unit>.parquet`` in the ``Document`` schema; ``meta`` holds the
provenance: ``synthetic``, ``source_id``, ``style``, ``model``, ``prompt`` (template origin),
``prompt_sha256``, ``params`` (generation parameters) and ``pieces``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.engine import Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.io import read_unit
from tokenmill.io.documents import to_documents
from tokenmill.job.options import JobOptions
from tokenmill.records import DOCUMENT
from tokenmill.report.accounting import Stats
from tokenmill.report.rejects import RejectSink
from tokenmill.synth.client import Client, MalformedReply, Reply
from tokenmill.synth.run import Prompt, load_prompt, print_synth_summary, run_synth

STYLES = ("wikipedia", "qa", "easy", "hard")
REFUSAL = re.compile(r"^\s*(i'?m sorry|i am sorry|sorry,|i cannot|i can'?t|i won'?t|as an ai\b|i'?m unable|i am unable)",
                     re.IGNORECASE)


def split_text(text: str, *, max_chars: int) -> list[str]:
    """Pieces of at most ``max_chars`` characters, cut at the coarsest boundary that fits."""
    pieces: list[str] = []
    for para in (p for p in re.split(r"\n\s*\n", text) if p.strip()):
        pieces.extend(_fit(para.strip(), max_chars, ("\n", ". ", " ")))
    merged: list[str] = []
    for p in pieces:  # pack small neighbours together, in order
        if merged and len(merged[-1]) + 2 + len(p) <= max_chars:
            merged[-1] = f"{merged[-1]}\n\n{p}"
        else:
            merged.append(p)
    return merged


def _fit(text: str, max_chars: int, seps: tuple[str, ...]) -> list[str]:
    if len(text) <= max_chars:
        return [text]
    if not seps:
        return [text[i:i + max_chars] for i in range(0, len(text), max_chars)]
    sep, out, cur = seps[0], [], ""
    for part in text.split(sep):
        cand = f"{cur}{sep}{part}" if cur else part
        if len(cand) <= max_chars:
            cur = cand
            continue
        if cur:
            out.append(cur)
        if len(part) > max_chars:
            out.extend(_fit(part, max_chars, seps[1:]))
            cur = ""
        else:
            cur = part
    if cur:
        out.append(cur)
    return out


def add_usage(usage: dict, replies: list) -> None:
    """Add the tokens of ``replies`` (those that are replies, cached or not) to a unit's ``usage``."""
    for r in replies:
        if isinstance(r, Reply):
            usage["prompt_tokens"] += r.prompt_tokens
            usage["completion_tokens"] += r.completion_tokens


def failure(reply: Reply | Exception) -> str | None:
    """Why a reply is unusable, or ``None``."""
    if isinstance(reply, MalformedReply):
        return "synth_malformed"
    if isinstance(reply, Exception):
        raise reply
    if reply.finish_reason == "length":
        return "synth_truncated"
    if not reply.content.strip():
        return "synth_empty"
    if REFUSAL.match(reply.content):
        return "synth_refusal"
    return None


@dataclass(frozen=True)
class RephraseTask:
    client: Client
    prompt: Prompt
    style: str
    schemas: dict[str, dict]
    chunk_chars: int
    batch_rows: int = 256
    limit: int | None = None  # first records of every input only (a trial run: --limit)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        stats, rows = Stats(), {name: [] for name in DOCUMENT.names}
        sink = RejectSink(staging, unit.payload)
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        for raw in read_unit(unit.payload, batch_rows=self.batch_rows, limit=self.limit):
            stats.input += len(raw) + len(raw.rejects)
            stats.bytes_in += raw.nbytes
            sink.add(raw.rejects, stats)
            docs, rejects = to_documents(raw, self.schemas.get(raw.source, {}))
            sink.add(rejects, stats)
            self._rephrase(docs, stats, rows, usage)
        sink.close()
        rel = f"documents/part-{unit.index:06d}.parquet"
        (staging / "documents").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pydict(rows, schema=DOCUMENT), staging / rel)
        return UnitResult(stats=stats, outputs=[rel], data={"documents": rel, **usage})

    def _rephrase(self, docs: pa.RecordBatch, stats: Stats, rows: dict, usage: dict) -> None:
        d = docs.to_pydict()
        pieces = [split_text(t, max_chars=self.chunk_chars) for t in d["text"]]
        requests = [([{"role": "user", "content": self.prompt.render(text=p)}], 0) for ps in pieces for p in ps]
        replies = iter(asyncio.run(self.client.complete_many(requests)))
        for i, ps in enumerate(pieces):
            got = [next(replies) for _ in ps]
            why = next((w for w in map(failure, got) if w), None) if got else "synth_empty"
            add_usage(usage, got)
            if why:
                stats.filter(why)
                continue
            self._keep(d, i, "\n\n".join(r.content.strip() for r in got if isinstance(r, Reply)), len(ps), rows)
            stats.kept += 1

    def _keep(self, d: dict, i: int, text: str, n_pieces: int, rows: dict) -> None:
        meta = {"synthetic": True, "source_id": d["id"][i], "style": self.style, "model": self.client.model,
                "prompt": self.prompt.origin, "prompt_sha256": self.prompt.sha256,
                "params": self.client.generation.body(), "pieces": n_pieces}
        if d["meta"][i]:
            meta["source_meta"] = d["meta"][i]
        rows["id"].append(f"{d['id'][i]}#{self.style}")
        rows["text"].append(text)
        rows["source"].append(d["source"][i])
        rows["url"].append(d["url"][i])
        rows["license"].append(d["license"][i])
        rows["meta"].append(json.dumps(meta, sort_keys=True))


def rephrase(
    inputs: Sequence[str],
    *,
    out: str | Path,
    client: Client,
    style: str = "wikipedia",
    prompt_file: str | None = None,
    chunk_chars: int = 6000,
    unit_bytes: int = 8 << 20,
    overwrite: bool = False,
    progress: bool | None = None,
    options: JobOptions | None = None,
) -> dict:
    """Rewrite every document of the inputs in ``style``; return the manifest (a dry run: the plan). ``options``:
    the job options (``limit``, ``exclude``, ``dry_run`` ...; when given, ``unit_bytes``, ``overwrite`` and
    ``progress`` are its)."""
    if prompt_file is None and style not in STYLES:
        raise ConfigError(f"--style {style!r}: expected one of {', '.join(STYLES)} (or give --prompt-file)")
    if chunk_chars < 200:
        raise ConfigError(f"--chunk-chars {chunk_chars}: expected at least 200")
    prompt = load_prompt(prompt_file, default=style, placeholder="text")
    params = {"style": style, "prompt_sha256": prompt.sha256, "model": client.model,
              "generation": client.generation.body(), "chunk_chars": chunk_chars}
    options = options or JobOptions(unit_bytes=unit_bytes, overwrite=overwrite, no_progress=progress is False)
    return run_synth("rephrase", inputs, out=out, client=client, params=params, takes="pretrain", options=options,
                     task=lambda run: RephraseTask(client, prompt, style, run.inputs.schemas, chunk_chars,
                                                   limit=run.options.limit))


def summarize(manifest: dict, out: Path) -> None:
    print_synth_summary(manifest, out)
