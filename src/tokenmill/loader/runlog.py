"""The consumed-token log a recipe loader writes, and its check against the plan.

Log. ``PackedLoader.from_recipe(..., log_dir=DIR)`` appends JSON lines to ``DIR/consumed.rank{R}.jsonl``,
one file per rank, flushed line by line (a killed run keeps every step it logged):

- ``{"kind": "start", "fingerprint", "rank", "world_size", "batch_size", "cursor", "time"}`` each time a
  loader starts iterating (a resume adds one);
- ``{"kind": "step", "rank", "step", "first", "stride", "count", "tokens": {phase: {source: n}}}`` for every
  batch handed to the training loop: the batch is global samples ``first + stride * i`` for ``i < count``,
  ``tokens`` their real (non-pad) tokens by phase and source; ``step`` is the global step at this loader's
  batch size (``first // (batch_size x world_size)``);
- ``{"kind": "val", "step", "phase", "source", "loss"}`` for each ``RunLog.validation`` call.

Check. :func:`check_run` reads every rank's file, keeps each global sample once (a resume that replays
steps logged before a crash is counted once, and reported), sums the tokens by phase and source and
compares them with the plan's: a finished run of the plan matches it exactly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tokenmill.errors import InputError

LOG_GLOB = "consumed.rank*.jsonl"


class RunLog:
    """Writer of one rank's log lines (see the module doc)."""

    def __init__(self, directory, *, rank: int, dataset):
        self.directory, self.rank, self.dataset = Path(directory), int(rank), dataset
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file of that name, a file on the way, no permission
            raise InputError(f"log_dir {self.directory}: cannot hold the run log ({exc.strerror or exc}); "
                             "give a folder (it is created when missing)") from None
        self.path = self.directory / f"consumed.rank{self.rank}.jsonl"

    def _write(self, line: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, sort_keys=True) + "\n")

    def start(self, *, world_size: int, batch_size: int, cursor: int) -> None:
        self._write({"kind": "start", "fingerprint": self.dataset.fingerprint, "rank": self.rank,
                     "world_size": world_size, "batch_size": batch_size, "cursor": cursor, "time": time.time()})

    def step(self, *, first: int, stride: int, count: int, global_batch: int, step: int | None = None) -> None:
        """Log one batch; ``step`` (the global step) defaults to ``first`` over ``global_batch`` (one batch size)."""
        tokens: dict[str, dict[str, int]] = {}
        for k in range(first, first + stride * count, stride):
            source, n = self.dataset.sample_tokens(k)
            per_phase = tokens.setdefault(self.dataset.phase_of(k).name, {})
            per_phase[source] = per_phase.get(source, 0) + n
        step = (first - self.rank) // global_batch if step is None else int(step)
        self._write({"kind": "step", "rank": self.rank, "step": step, "first": first,
                     "stride": stride, "count": count, "tokens": tokens})

    def validation(self, *, step: int, phase: str, source: str, loss: float) -> None:
        """Record a validation loss of ``source`` (evaluated on ``dataset.validation(phase)[source]``)."""
        self._write({"kind": "val", "rank": self.rank, "step": int(step), "phase": phase, "source": source,
                     "loss": float(loss)})


def read_log(directory) -> list[dict]:
    files = sorted(Path(directory).glob(LOG_GLOB)) if Path(directory).is_dir() else []
    if not files:
        raise InputError(f"no run log ({LOG_GLOB}) in {directory}: pass the log_dir given to PackedLoader.from_recipe")
    lines = []
    for path in files:
        texts = path.read_bytes().decode("utf-8", errors="replace").splitlines()
        for n, text in enumerate(texts, 1):
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                if n < len(texts):  # only a torn last line (a kill mid-write) is forgiven
                    raise InputError(f"{path}:{n}: not a JSON line; the log is damaged") from None
                continue
            problem = line_problem(line)
            if problem:
                raise InputError(f"{path}:{n}: {problem}; the log is damaged or not a run log of from_recipe")
            lines.append(line)
    return lines


FIELDS = {  # kind: {field: type}, what check_run reads of each line
    "start": {"fingerprint": str},
    "step": {"first": int, "stride": int, "count": int, "tokens": dict},
    "val": {"step": int, "phase": str, "source": str, "loss": (int, float)},
}
MAX_COUNT = 1 << 24  # samples of one rank's batch: more is a damaged number, not a batch


def line_problem(line) -> str | None:
    """What is wrong with one parsed log line (``None``: nothing), so a damaged line is named, not a KeyError."""
    if not isinstance(line, dict):
        return "not a run-log object"
    kind = line.get("kind")
    fields = FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        return f"unknown kind {line.get('kind')!r} (expected one of {', '.join(FIELDS)})"
    kind = line["kind"]
    bad = [k for k, t in fields.items() if not isinstance(line.get(k), t) or isinstance(line.get(k), bool)]
    if kind == "step" and "tokens" not in bad and not _token_table(line["tokens"]):
        bad.append("tokens")
    if bad:
        return f"a {kind!r} line without a valid {', '.join(bad)}"
    if kind == "step" and not (line["first"] >= 0 and line["stride"] >= 1 and 0 <= line["count"] <= MAX_COUNT):
        return (f"a 'step' line with stride {line['stride']}, first {line['first']}, count {line['count']} "
                f"(expected stride >= 1, first >= 0, count in [0, {MAX_COUNT:,}])")
    return None


def _token_table(tokens: dict) -> bool:
    """``{phase: {source: whole number}}``."""
    return all(isinstance(by, dict) and all(isinstance(n, int) and not isinstance(n, bool) for n in by.values())
               for by in tokens.values())


def check_run(plan: dict, directory) -> dict:
    """``{"phases": [{"name", "planned", "consumed"}], "problems": [...], "served_samples", ...}``."""
    lines = read_log(directory)
    seen, tokens, repeated = set(), {}, 0
    for line in (x for x in lines if x.get("kind") == "step"):
        positions = range(line["first"], line["first"] + line["stride"] * line["count"], line["stride"])
        fresh = [p for p in positions if p not in seen]
        if len(fresh) < len(positions):  # a replayed step: counted once
            repeated += len(positions) - len(fresh)
            continue
        seen.update(positions)
        for phase, by_source in line["tokens"].items():
            for source, n in by_source.items():
                tokens.setdefault(phase, {}).setdefault(source, 0)
                tokens[phase][source] += n
    phases = [{"name": p["name"], "planned": p["tokens"], "consumed": tokens.get(p["name"], {})} for p in plan["phases"]]
    fingerprints = {x["fingerprint"] for x in lines if x.get("kind") == "start"}
    problems = _problems(plan, phases, fingerprints, len(seen))
    val: dict[str, dict[str, list]] = {}
    for x in (x for x in lines if x.get("kind") == "val"):
        val.setdefault(x["phase"], {}).setdefault(x["source"], []).append([x["step"], x["loss"]])
    return {"phases": phases, "served_samples": len(seen), "planned_samples": plan["total_samples"],
            "replayed_samples": repeated, "problems": problems, "validation": val}


def _problems(plan: dict, phases: list[dict], fingerprints: set, served: int) -> list[str]:
    out = []
    if fingerprints - {plan["fingerprint"]}:
        out.append("the run was made with another recipe or other data than this plan (fingerprints differ)")
    if served < plan["total_samples"]:
        out.append(f"the run consumed {served:,} of {plan['total_samples']:,} planned samples: it stopped early "
                   "or dropped a tail (batch_size x world_size must divide the recipe's global batch)")
    for p in phases:
        for source in sorted(set(p["planned"]) | set(p["consumed"])):
            want, got = p["planned"].get(source, 0), p["consumed"].get(source, 0)
            if got > want or (served >= plan["total_samples"] and got != want):
                out.append(f"phase {p['name']!r}, source {source!r}: consumed {got:,} tokens, planned {want:,}")
    return out
