"""What both synthetic-data commands share: the job around a per-unit generation task.

A job of the one driver (:func:`tokenmill.job.run`). Inputs are read like every track reads them (work units
inside files, rejects with file and line). One stage, ``synth_<kind>``, runs one unit at a time in this
process: inside a unit the requests run concurrently (``--concurrency``), which is where the time goes; a
unit commits its output file and its rejects atomically, then its completion marker, so a killed run resumes
at the first unfinished unit, and the response cache makes even the unfinished one cost nothing it already
paid for.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill.engine import LocalExecutor, Stage, StagePlan, UnitResult, total
from tokenmill.errors import ConfigError
from tokenmill.job.driver import check_job
from tokenmill.job.options import JobOptions
from tokenmill.job.run import Job, Results, Run
from tokenmill.job.run import run as run_job
from tokenmill.synth.client import Client

if TYPE_CHECKING:
    from tokenmill.engine.store import Url

PROMPTS_DIR = Path(__file__).parent / "prompts"


@dataclass(frozen=True)
class Prompt:
    """A prompt template: a text file with ``{text}`` (rephrase) or ``{prompt}`` (distill) in it."""

    text: str
    origin: str

    @property
    def sha256(self) -> str:
        import hashlib

        return hashlib.sha256(self.text.encode()).hexdigest()

    def render(self, **values: str) -> str:
        out = self.text
        for k, v in values.items():
            out = out.replace("{" + k + "}", v)
        return out.strip()


def load_prompt(spec: str | None, *, default: str, placeholder: str) -> Prompt:
    path = Path(spec) if spec else PROMPTS_DIR / f"{default}.txt"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PROMPTS_DIR.glob("*.txt")))
        raise ConfigError(f"prompt template {spec or default!r} not found (built-in: {known}; or give a file)")
    text = path.read_text(encoding="utf-8")
    if "{" + placeholder + "}" not in text:
        raise ConfigError(f"prompt template {path} has no {{{placeholder}}} placeholder for the input")
    return Prompt(text, str(path) if spec else f"builtin:{default}")


class UnitProgress:
    """One line per finished unit on stderr: records, kept, requests, tokens/s."""

    def __init__(self, client: Client, n_units: int, enabled: bool):
        self.client, self.n, self.enabled, self.done = client, n_units, enabled, 0
        self.start = time.monotonic()

    def update(self, result: UnitResult) -> None:
        self.done += 1
        if not self.enabled:
            return
        u = self.client.usage
        secs = max(time.monotonic() - self.start, 1e-6)
        print(f"[{self.done}/{self.n} units] kept {result.stats.kept}/{result.stats.input}  requests {u.requests} "
              f"({u.cached} cached, {u.retries} retries)  {u.completion_tokens / secs:,.0f} generated tokens/s",
              file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def run_synth(kind: str, inputs: Sequence[str], *, out: str | Path, client: Client, task: Callable[[Run], Callable],
              params: dict[str, Any], takes: str, options: JobOptions) -> dict:
    """Run the generation task ``task(run)`` makes over the inputs' units (read as ``takes`` data); return the
    manifest. The run itself is :func:`tokenmill.job.run` of :func:`synth_job`, in this process."""
    job = synth_job(kind, client=client, task=task, params=params, takes=takes,
                    progress=False if options.no_progress else None)
    return run_job(job, inputs, out=out, options=options, executor=LocalExecutor(workers=1), tokenizer=None)


def synth_job(kind: str, *, client: Client, task: Callable[[Run], Callable], params: dict[str, Any], takes: str,
              progress: bool | None = None) -> Job:
    """The ``synth <kind>`` job: one stage, ``synth_<kind>``, of generation over the input units; the server is
    asked (``client.check``) once the output is known to be writable, before the output is taken."""
    name = f"synth {kind}"

    def configure(run: Run) -> Callable:
        run.config["synth"] = params
        if not run.options.dry_run:
            check_job(run.out, workflow=name, overwrite=run.options.overwrite)  # refused before the server is asked
            client.check()
        return task(run)

    def stages(run: Run) -> list[Stage]:
        return [Stage(f"synth_{kind}", 1, lambda ctx: StagePlan(run.input_units(), run.guarded(run.plan), params))]

    def report(run: Run, results: Results, manifest: dict) -> dict:
        summed = total(results[f"synth_{kind}"])
        usage = client.usage.to_dict()
        usage["seconds"] = round(time.monotonic() - run.started, 3)
        return {"server": client.server, "model": client.model, "params": params, "outputs": summed.outputs,
                "usage_this_run": usage,
                "usage_generated": {"prompt_tokens": sum(r.data.get("prompt_tokens", 0) for r in results[f"synth_{kind}"]),
                                    "completion_tokens": sum(r.data.get("completion_tokens", 0)
                                                             for r in results[f"synth_{kind}"])}}

    def lines(run: Run) -> Callable:
        bar = UnitProgress(client, len(run.inputs.units), sys.stderr.isatty() if progress is None else progress)
        return lambda key, units, done: bar

    return Job(name, takes, stages, report, configure=configure, progress=lines)


def print_synth_summary(manifest: dict, out: Path | Url) -> None:
    c, u = manifest["counts"], manifest["usage_this_run"]
    print(f"{manifest['track']}: {c['kept']:,} kept of {c['input']:,} records -> {out}")
    print(manifest["identity"])
    rate = u["completion_tokens"] / u["seconds"] if u["seconds"] else 0.0
    print(f"requests {u['requests']:,} ({u['cached']:,} from the cache, {u['retries']:,} retries), "
          f"{u['prompt_tokens']:,} prompt + {u['completion_tokens']:,} generated tokens, {rate:,.0f} generated tokens/s")
    print(f"manifest: {out / 'manifest.json'}")
