"""What both synthetic-data commands share: the workflow around a per-unit generation task.

Inputs are read like every track reads them (work units inside files, rejects with file and line). One
stage, ``synth_<kind>``, runs one unit at a time in this process: inside a unit the requests run
concurrently (``--concurrency``), which is where the time goes; a unit commits its output file and its
rejects atomically, then its completion marker, so a killed run resumes at the first unfinished unit, and
the response cache makes even the unfinished one cost nothing it already paid for.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmill.engine import LocalExecutor, Stage, StagePlan, Unit, UnitResult, run_workflow, total
from tokenmill.synth.client import Client

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
    from tokenmill.errors import ConfigError

    path = Path(spec) if spec else PROMPTS_DIR / f"{default}.txt"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PROMPTS_DIR.glob("*.txt")))
        raise ConfigError(f"prompt template {spec or default!r} not found (built-in: {known}; or give a file)")
    text = path.read_text(encoding="utf-8")
    if "{" + placeholder + "}" not in text:
        raise ConfigError(f"prompt template {path} has no {{{placeholder}}} placeholder for the input")
    return Prompt(text, str(path) if spec else f"builtin:{default}")


def input_units(inputs: Sequence[str], *, unit_bytes: int, text_mode: str = "auto") -> list[Unit]:
    from tokenmill.io import expand_inputs, plan_units

    files = expand_inputs(list(inputs), text_mode=text_mode)
    return [Unit(u.index, u.name, size=max(u.stop - u.start, 0) if u.stop >= 0 else u.file.size, payload=u)
            for u in plan_units(files, unit_bytes=unit_bytes)]


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


def run_synth(
    kind: str,
    inputs: Sequence[str],
    *,
    out: str | Path,
    client: Client,
    task: Callable[[Unit, Path], UnitResult],
    params: dict[str, Any],
    unit_bytes: int,
    overwrite: bool,
    progress: bool | None,
    planned: Any = None,
) -> dict:
    """Run the generation ``task`` over the inputs' units (of ``planned``, :class:`~tokenmill.job.Inputs`, when
    the command routed them); write and return the manifest. ``out`` is guarded and locked by the job driver."""
    from tokenmill.job import check_job, hold_job, resolve_out

    started = time.monotonic()
    if planned is not None:
        units = [Unit(u.index, u.name, size=max(u.stop - u.start, 0) if u.stop >= 0 else u.file.size, payload=u)
                 for u in planned.units]
    else:
        units = input_units(inputs, unit_bytes=unit_bytes)
    out, _ = resolve_out(out, [*map(str, inputs), *(u.payload.file.path for u in units)])
    check_job(out, workflow=f"synth {kind}", overwrite=overwrite)  # refused before the server is asked
    client.check()
    with hold_job(out, workflow=f"synth {kind}", overwrite=overwrite):
        return _run(kind, out, client, task, params, units, progress, started)


def _run(kind: str, out: Path, client: Client, task: Callable, params: dict, units: list[Unit], progress: bool | None,
         started: float) -> dict:
    from tokenmill.base.files import atomic_write
    from tokenmill.report.rejects import merge_rejects

    fingerprint = json.dumps({"kind": kind, "inputs": [u.payload.file.path for u in units],
                              "sizes": [u.payload.file.size for u in units], **params}, sort_keys=True, default=str)
    stage = Stage(f"synth_{kind}", 1, lambda ctx: StagePlan(units, task, params))
    bar = UnitProgress(client, len(units), sys.stderr.isatty() if progress is None else progress)
    results = run_workflow([stage], out=out, fingerprint=fingerprint, executor=LocalExecutor(workers=1),
                           progress=lambda key, units_, done: bar, locked=True)[stage.name]
    n_rejects = merge_rejects(out, [u.name for u in units])
    summed = total(results)
    usage = client.usage.to_dict()
    usage["seconds"] = round(time.monotonic() - started, 3)
    manifest = {"kind": f"synth {kind}", "server": client.server, "model": client.model, "params": params,
                "counts": summed.stats.to_dict(), "identity": summed.stats.identity_line(),
                "outputs": summed.outputs, "usage_this_run": usage,
                "usage_generated": {"prompt_tokens": sum(r.data.get("prompt_tokens", 0) for r in results),
                                    "completion_tokens": sum(r.data.get("completion_tokens", 0) for r in results)},
                "rejects_file": "rejects.jsonl" if n_rejects else None}
    atomic_write(out / "manifest.json", json.dumps(manifest, indent=2, default=str).encode() + b"\n")
    return manifest


def print_synth_summary(manifest: dict, out: Path) -> None:
    c, u = manifest["counts"], manifest["usage_this_run"]
    print(f"{manifest['kind']}: {c['kept']:,} kept of {c['input']:,} records -> {out}")
    print(manifest["identity"])
    rate = u["completion_tokens"] / u["seconds"] if u["seconds"] else 0.0
    print(f"requests {u['requests']:,} ({u['cached']:,} from the cache, {u['retries']:,} retries), "
          f"{u['prompt_tokens']:,} prompt + {u['completion_tokens']:,} generated tokens, {rate:,.0f} generated tokens/s")
    print(f"manifest: {out / 'manifest.json'}")
