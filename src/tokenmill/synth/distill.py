"""``tokenmill synth distill``: a teacher model answers each prompt; its reasoning trace is kept.

Prompts come from SFT records (the first user message of ``messages``/``conversations``, or
``prompt``/``instruction`` + ``input``) or from plain problem lists (``question``, ``problem``, ``text``).
The teacher's reasoning is its ``reasoning_content`` when the server sends one, else an inline
``<think>…</think>`` block at the start of its answer; it becomes the assistant message's
``reasoning_content``, so the SFT track trains the process, not only the final answer.

With a ground-truth answer in the record (GSM8K ``answer`` after ``####``, MATH ``solution``'s last
``\\boxed{}``, or ``ground_truth``/``final_answer``), ``--samples N`` answers are drawn per prompt and the
first whose final answer (its last ``\\boxed{}``, else the text after ``####``, else its last number)
matches is kept: rejection sampling. Prompts with no usable sample are counted by reason:
``synth_wrong_answer``, ``synth_no_answer`` (no final answer found), ``synth_refusal``, ``synth_empty``,
``synth_truncated``, ``synth_malformed``; records without a prompt are rejected as ``missing_field``.

Output: ``DIR/conversations/part-<unit>.jsonl``, one OpenAI ``messages`` record per kept prompt with
``meta`` (synthetic, source id, model, prompt-template hash, parameters, sample index, checked or not).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmill.engine import Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.io import read_unit
from tokenmill.job.inputs import ANY
from tokenmill.job.options import JobOptions
from tokenmill.records import record_id
from tokenmill.report.accounting import Reject, Stats
from tokenmill.report.rejects import RejectSink
from tokenmill.synth.client import Client, Reply
from tokenmill.synth.rephrase import add_usage, failure
from tokenmill.synth.run import Prompt, load_prompt, run_synth

THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


PROMPT_KEYS = ("messages", "conversations", "instruction", "prompt", "question", "problem", "query", "text")


def no_prompt(row: dict, source: str, loc: int) -> Reject:
    """The reject of a record without a usable prompt: ``wrong_type`` when a prompt field holds another type
    (a number, a mapping), else ``missing_field``."""
    odd = next((k for k in PROMPT_KEYS if row.get(k) is not None and not isinstance(row[k], (str, list))), None)
    if odd:
        return Reject(source, loc, "wrong_type", f"{source}:{loc}: field {odd!r} is {type(row[odd]).__name__}, "
                      "expected a string (or a list of turns)", raw=row)
    return Reject(source, loc, "missing_field", f"{source}:{loc}: no prompt found (messages, conversations, "
                  "instruction, prompt, question, problem or text)", raw=row)


def prompt_of(row: dict) -> str | None:
    """The user's request in one record of any common layout, or ``None``."""
    for key in ("messages", "conversations"):
        turns = row.get(key)
        if isinstance(turns, list):
            for t in turns:
                if isinstance(t, dict) and (t.get("role") or t.get("from")) in ("user", "human"):
                    text = t.get("content", t.get("value"))
                    return text if isinstance(text, str) and text.strip() else None
    if isinstance(row.get("instruction"), str) and row["instruction"].strip():
        extra = row.get("input")
        return row["instruction"] + (f"\n\n{extra}" if isinstance(extra, str) and extra.strip() else "")
    for key in ("prompt", "question", "problem", "query", "text"):
        if isinstance(row.get(key), str) and row[key].strip():
            return row[key]
    return None


def ground_truth(row: dict) -> str | None:
    """The reference final answer of a record, when it has one."""
    for key in ("ground_truth", "final_answer"):
        if row.get(key) not in (None, ""):
            return str(row[key])
    if isinstance(row.get("answer"), str) and "####" in row["answer"]:
        return row["answer"].rsplit("####", 1)[1].strip()
    if isinstance(row.get("answer"), (int, float)) and not isinstance(row.get("answer"), bool):
        return str(row["answer"])
    if isinstance(row.get("solution"), str):
        return last_boxed(row["solution"])
    return None


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces balanced), or ``None``."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth, out = start + len("\\boxed{"), 1, []
    while i < len(text):
        c = text[i]
        depth += (c == "{") - (c == "}")
        if depth == 0:
            return "".join(out).strip()
        out.append(c)
        i += 1
    return None


def final_answer(text: str) -> str | None:
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip()
        return tail.splitlines()[0].strip() if tail else None
    nums = NUMBER.findall(text)
    return nums[-1] if nums else None


def same_answer(a: str, b: str) -> bool:
    """Equal after removing spaces, ``$``, thousands commas and a trailing period; numerically equal numbers too."""
    def norm(s: str) -> str:
        s = s.strip().rstrip(".").replace("$", "").replace(" ", "")
        s = re.sub(r"^\\text\{(.*)\}$", r"\1", s)
        return s.replace(",", "") if NUMBER.fullmatch(s) else s

    x, y = norm(a), norm(b)
    if x == y:
        return True
    try:
        return abs(float(x) - float(y)) < 1e-9
    except ValueError:
        return False


def split_reasoning(reply: Reply) -> tuple[str, str | None]:
    """``(answer, reasoning)`` of a reply: the server's reasoning field, else a leading ``<think>`` block."""
    if reply.reasoning:
        return reply.content.strip(), reply.reasoning.strip()
    m = THINK.match(reply.content)
    if m:
        return reply.content[m.end():].strip(), m.group(1).strip()
    return reply.content.strip(), None


@dataclass(frozen=True)
class DistillTask:
    client: Client
    prompt: Prompt
    samples: int
    batch_rows: int = 256
    limit: int | None = None  # first records of every input only (a trial run: --limit)

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        stats, lines = Stats(), []
        sink = RejectSink(staging, unit.payload)
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        for raw in read_unit(unit.payload, batch_rows=self.batch_rows, limit=self.limit):
            stats.input += len(raw) + len(raw.rejects)
            stats.bytes_in += raw.nbytes
            sink.add(raw.rejects, stats)
            todo = []
            for row, loc in zip(raw.to_rows(), raw.locs):
                p = prompt_of(row)
                if p is None:
                    sink.add([no_prompt(row, raw.source, loc)], stats)
                    continue
                todo.append((row, loc, p))
            lines += self._distill(todo, raw.source, stats, usage)
        sink.close()
        rel = f"conversations/part-{unit.index:06d}.jsonl"
        (staging / "conversations").mkdir(parents=True, exist_ok=True)
        (staging / rel).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return UnitResult(stats=stats, outputs=[rel], data={"conversations": rel, **usage})

    def _distill(self, todo: list, source: str, stats: Stats, usage: dict) -> list[str]:
        n = lambda row: self.samples if ground_truth(row) is not None else 1  # noqa: E731
        requests = [([{"role": "user", "content": self.prompt.render(prompt=p)}], s)
                    for row, _, p in todo for s in range(n(row))]
        replies = iter(asyncio.run(self.client.complete_many(requests)))
        out = []
        for row, loc, p in todo:
            got = [next(replies) for _ in range(n(row))]
            add_usage(usage, got)
            picked, why = self._pick(got, ground_truth(row))
            if picked is None:
                stats.filter(why)
                continue
            out.append(self._record(row, loc, source, p, *picked, checked=ground_truth(row) is not None))
            stats.kept += 1
        return out

    def _pick(self, got: list, truth: str | None) -> tuple[tuple[int, Reply] | None, str]:
        why = "synth_empty"
        for i, r in enumerate(got):
            bad = failure(r)
            if bad:
                why = bad
                continue
            if truth is None:
                return (i, r), ""
            answer = final_answer(split_reasoning(r)[0])
            if answer is None:
                why = "synth_no_answer"
            elif same_answer(answer, truth):
                return (i, r), ""
            else:
                why = "synth_wrong_answer"
        return None, why

    def _record(self, row: dict, loc: int, source: str, prompt: str, sample: int, reply: Reply, *, checked: bool) -> str:
        answer, reasoning = split_reasoning(reply)
        assistant: dict[str, Any] = {"role": "assistant", "content": answer}
        if reasoning:
            assistant["reasoning_content"] = reasoning
        meta = {"synthetic": True, "source_id": record_id(row.get("id"), source, loc), "model": self.client.model,
                "prompt": self.prompt.origin, "prompt_sha256": self.prompt.sha256,
                "params": self.client.generation.body(), "sample": sample, "answer_checked": checked}
        rec = {"id": f"{meta['source_id']}#distill", "messages": [{"role": "user", "content": prompt}, assistant],
               "meta": meta}
        return json.dumps(rec, ensure_ascii=False, sort_keys=True)


def distill(
    inputs: Sequence[str],
    *,
    out: str | Path,
    client: Client,
    samples: int = 1,
    prompt_file: str | None = None,
    unit_bytes: int = 8 << 20,
    overwrite: bool = False,
    progress: bool | None = None,
    options: JobOptions | None = None,
) -> dict:
    """Answer every prompt of the inputs with the teacher; return the manifest (a dry run: the plan). ``options``:
    the job options (``limit``, ``exclude``, ``dry_run`` ...; when given, ``unit_bytes``, ``overwrite`` and
    ``progress`` are its)."""
    if samples < 1:
        raise ConfigError(f"--samples {samples}: expected at least 1")
    prompt = load_prompt(prompt_file, default="distill", placeholder="prompt")
    params = {"samples": samples, "prompt_sha256": prompt.sha256, "model": client.model,
              "generation": client.generation.body()}
    options = options or JobOptions(unit_bytes=unit_bytes, overwrite=overwrite, no_progress=progress is False)
    return run_synth("distill", inputs, out=out, client=client, params=params, takes=ANY, options=options,
                     task=lambda run: DistillTask(client, prompt, samples, limit=run.options.limit))
