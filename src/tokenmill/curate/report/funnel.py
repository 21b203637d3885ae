"""The funnel: how many documents each step removed, of the input and of what reached it.

DCLM's Figure 4 in numbers: for every step in order, the documents that reached it, those it removed
(each document counted once, at the first rule that removed it), that as a share of the input records
and of what reached the step, and what was left. Read errors (rejects) come first, as their own line.

``recompute`` rebuilds the funnel from the ledger for other parameters (``--set gopher_quality.
min_stop_words=3``) without reading any text: each step's ``decide`` runs again over its stored
statistics. With every step scoring every document (the default, see :mod:`tokenmill.steps.cascade`),
the result equals a full rerun with those parameters; otherwise documents a loosened threshold lets
through to a step that never scored them are counted as ``unscored`` and kept, and the funnel says so.
A step names its decision parameters (``decision_params``: thresholds ``decide`` reads); changing any
other parameter changes its scores (``fineweb.short_line_length`` changes which lines are short), and is
refused naming the ones that replay (rerun instead); a step that names none replays nothing. Of the
corpus steps only a quality step's ``top_fraction`` replays (a new percentile of the scores in its
ledger, by the run's own histogram rule, over the documents that now reach it); a dedup decision needs
the text, and is refused.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import yaml

from tokenmill.curate.quality.top import BINS, cut_from_histogram, score_bins
from tokenmill.curate.report.details import attach, render_details
from tokenmill.errors import ConfigError, InputError
from tokenmill.report.ledger import REJECTED, read_columns, read_stage_parts, stage_parts
from tokenmill.steps.build import build_step, recorded_options
from tokenmill.steps.cascade import decisions
from tokenmill.steps.contract import Step, reason
from tokenmill.steps.plain import RecordedPlainStep


def build_funnel(records: int, rejected: Counter, steps: list[dict], filtered: Counter) -> dict:
    """The funnel of ``records`` input records, given the rejects and the removals by reason."""
    rows = []
    left = records
    if rejected:
        n = sum(rejected.values())
        rows.append(_row("rejected", records, n, records, dict(rejected)))
        left -= n
    for entry in steps:
        prefix = entry["id"] + ":"
        rules = {k: v for k, v in sorted(filtered.items()) if k.startswith(prefix)}
        removed = sum(rules.values())
        rows.append(_row(entry["id"], left, removed, records, rules))
        left -= removed
    return {"input": records, "rows": rows, "kept": left}


def _row(name: str, reached: int, removed: int, records: int, rules: dict) -> dict:
    return {"step": name, "reached": reached, "removed": removed, "left": reached - removed,
            "share_of_input": removed / records if records else 0.0,
            "share_of_reached": removed / reached if reached else 0.0, "rules": rules}


def funnel_from_ledger(out: Path, manifest: dict) -> dict:
    """The recorded funnel of a run, from its decision ledger's ``reason`` column (:mod:`tokenmill.report.ledger`;
    from the manifest's counts for a run that wrote none)."""
    records, rejected, filtered = ledger_counts(Path(out), manifest)
    funnel = build_funnel(records, rejected, manifest["steps"], filtered)
    return attach(funnel, Path(out), manifest)


def ledger_counts(out: Path, manifest: dict) -> tuple[int, Counter, Counter]:
    """(records, rejects by reason, removals by reason) read from the run's decision ledger."""
    files = (manifest.get("decision_ledger") or {}).get("files")
    if not files:
        c = manifest["counts"]
        return c["input"], Counter(c["rejected"]), Counter(c["filtered"])
    reasons: Counter = Counter()
    records = 0
    for rel in files:
        column = read_columns(out / rel, ["reason"]).column("reason")
        records += len(column)
        reasons.update(r for r in column.to_pylist() if r is not None)
    rejected = Counter({k.split(":", 1)[1]: v for k, v in reasons.items() if k.startswith(REJECTED + ":")})
    return records, rejected, Counter({k: v for k, v in reasons.items() if not k.startswith(REJECTED + ":")})


def render_funnel(funnel: dict) -> str:
    """The funnel as a text table, as every run prints it (with dedup cluster sizes and score histograms
    under their steps, :mod:`tokenmill.curate.report.details`)."""
    lines = ["funnel: share removed of the input and of what reached each step",
             f"  {'step':<24} {'reached':>10} {'removed':>10} {'of input':>9} {'of reached':>11} {'left':>10}"]
    for r in funnel["rows"]:
        lines.append(f"  {r['step']:<24} {r['reached']:>10,} {r['removed']:>10,} {r['share_of_input']:>8.1%} "
                     f"{r['share_of_reached']:>10.1%} {r['left']:>10,}")
        for rule, n in sorted(r["rules"].items(), key=lambda kv: -kv[1]):
            lines.append(f"      {rule.split(':', 1)[-1]:<24} {'':>6} {n:>10,}")
        lines += render_details(r)
    share = funnel["kept"] / funnel["input"] if funnel["input"] else 0.0
    lines.append(f"  {'kept':<24} {'':>10} {'':>10} {'':>9} {'':>11} {funnel['kept']:>10,}  ({share:.1%} of the input)")
    if funnel.get("unscored"):
        lines.append(f"  note: {funnel['unscored']:,} document(s) reached a step that never scored them "
                     "(kept there); rerun for exact counts")
    return "\n".join(lines)


# --- recomputation -------------------------------------------------------------------------------------

def read_manifest(directory: str | Path) -> dict:
    path = Path(directory) / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except OSError:
        raise InputError(f"{directory}: no manifest.json; give the output directory of `tokenmill curate` "
                         "(or of `tokenmill pretrain` with steps)") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if "steps" not in manifest or not stage_parts(manifest):
        raise InputError(f"{path}: this run recorded no decision ledger (it ran no curation steps)")
    return manifest


def parse_sets(items: list[str]) -> dict[tuple[str, str], Any]:
    """``["gopher_quality.min_stop_words=3"]`` -> ``{("gopher_quality", "min_stop_words"): 3}`` (YAML values)."""
    out, problems = {}, []
    for item in items or []:
        key, eq, value = item.partition("=")
        step, dot, param = key.strip().partition(".")
        if not eq or not dot or not step or not param:
            problems.append(f"--set {item!r}: expected STEP.PARAM=VALUE, e.g. gopher_quality.min_stop_words=3")
            continue
        try:
            out[(step, param)] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            problems.append(f"--set {item!r}: the value is not valid YAML ({exc})")
    if problems:
        raise ConfigError(problems)
    return out


def _rebuild(entries: list[dict], sets: dict[tuple[str, str], Any]) -> list[Any]:
    names = {e["name"] for e in entries}
    problems = [f"--set {s}.{p}: no step {s!r} in this run (its steps: {', '.join(e['name'] for e in entries)})"
                for s, p in sets if s not in names]
    steps = []
    for _i, e in enumerate(entries):
        changes = {p: v for (s, p), v in sets.items() if s == e["name"]}
        if e["kind"] == "plain":  # a plain callable decided inside itself: replayed from its recorded decisions
            problems += [f"--set {e['name']}.{p}: {e['name']} is a plain callable step, which decides inside itself; "
                         "the ledger replays only its recorded decisions: rerun instead" for p in changes]
            steps.append(RecordedPlainStep(e["name"], e["version"]))
            continue
        if e["kind"] != "document":
            problems += _corpus_problems(e, changes)
            steps.append(None)
            continue
        unknown = [p for p in changes if p not in e["params"]]
        problems += [f"--set {e['name']}.{p}: {e['name']} has no parameter {p!r}; its parameters: "
                     f"{', '.join(e['params'])}" for p in unknown]
        try:
            label = {"step": e["class"]} if "class" in e else {"name": e["name"]}  # a user's step: by its class
            step = build_step({**recorded_options({**label, **e["params"]}), **changes}, where=f"--set {e['name']}")
        except ConfigError as exc:
            problems += exc.problems
            steps.append(None)
            continue
        problems += _score_problems(e["name"], step, [p for p in changes if p in e["params"]])
        steps.append(step)
    if problems:
        raise ConfigError(problems)
    return steps


def _score_problems(name: str, step: Step, changed: list[str]) -> list[str]:
    """A change the ledger cannot replay: a parameter outside the step's ``decision_params`` changes its
    scores (a step that names none replays nothing: the funnel cannot tell a threshold from a statistic
    parameter, and a silently unchanged funnel would read as "no effect")."""
    allowed = getattr(step, "decision_params", None) or ()
    replay = f"the parameters that replay: {', '.join(allowed)}" if allowed else "none of its parameters replay"
    return [f"--set {name}.{p}: changes how {name} scores documents, which the ledger cannot replay; rerun "
            f"`tokenmill curate` ({replay})" for p in changed if p not in allowed]


def _corpus_problems(entry: dict, changes: dict[str, Any]) -> list[str]:
    """A corpus step replays only a new ``top_fraction`` (a percentile of the scores in its ledger)."""
    problems = []
    for p, v in changes.items():
        if p == "top_fraction" and entry["params"].get("top_fraction") is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
                problems.append(f"--set {entry['name']}.top_fraction: expected a fraction in (0, 1], got {v!r}")
            continue
        problems.append(f"--set {entry['name']}.{p}: {entry['name']} is a corpus step (it decides over the whole "
                        "corpus); the ledger replays only a quality step's top_fraction: rerun `tokenmill curate`")
    return problems


def _recut(table: pa.Table, entry: dict, fraction: float, alive: np.ndarray) -> tuple[np.ndarray, float]:
    """New reasons of a ``top_fraction`` step's ledger rows for another fraction, and the new cut: the same
    histogram rule as the run (:mod:`tokenmill.curate.quality.top`), over the rows that now reach it."""
    scores = table.column(f"{entry['name']}.score").to_numpy(zero_copy_only=False).astype(np.float64)
    cut = cut_from_histogram(np.bincount(score_bins(scores[alive]), minlength=BINS), fraction)
    reasons = np.full(len(scores), None, dtype=object)
    reasons[scores < cut] = f"{entry['id']}:low_quality"
    return reasons, cut


def _keys(table: pa.Table) -> list[str]:
    """A document's identity across stages: its file and line (its id where a stage kept no line)."""
    src, ids = table.column("source").to_pylist(), table.column("id").to_pylist()
    locs = table.column("loc").to_pylist() if "loc" in table.column_names else [None] * len(ids)
    return [f"{s}\0{loc}" if loc is not None else f"{s}\0id\0{i}" for s, loc, i in zip(src, locs, ids)]


def _stat_columns(table: pa.Table, step: Step | RecordedPlainStep, rows: np.ndarray) -> dict[str, Any]:
    prefix = step.name + "."
    return {c[len(prefix):]: table.column(c).take(pa.array(rows)) for c in table.column_names if c.startswith(prefix)}


def _replay_stage(table: pa.Table, entries: list[dict], steps: list[Any], alive: np.ndarray,
                  score_removed: bool) -> tuple[np.ndarray, int]:
    """New reasons for the rows of one map stage's ledger (``alive``: rows that now reach the stage)."""
    n = table.num_rows
    new = np.full(n, None, dtype=object)
    old = np.array(table.column("reason").to_pylist(), dtype=object)
    order = {e["id"]: k for k, e in enumerate(entries)}
    old_at = np.array([order.get(r.split(":", 1)[0], len(entries)) if r else len(entries) for r in old])
    unscored = 0
    for k, (_entry, step) in enumerate(zip(entries, steps)):
        scored = np.ones(n, dtype=bool) if score_removed else old_at >= k
        todo = alive & (new == None)
        unscored += int(np.sum(todo & ~scored))
        rows = np.flatnonzero(todo & scored)
        if len(rows) == 0:
            continue
        rules = decisions(step, _stat_columns(table, step, rows), len(rows))
        hit = np.array([r is not None for r in rules], dtype=bool)
        new[rows[hit]] = [reason(step, str(r)) for r in rules[hit]]
    return new, unscored


def _with_sets(entry: dict, sets: dict[tuple[str, str], Any]) -> dict:
    """A step entry with its parameters as ``--set`` changed them (its histogram then marks the new threshold)."""
    changes = {p: v for (s, p), v in sets.items() if s == entry["name"]}
    return {**entry, "params": {**entry.get("params", {}), **changes}} if changes else entry


def recompute(directory: str | Path, sets: dict[tuple[str, str], Any]) -> dict:
    """The funnel of run ``directory`` with the parameters changed by ``sets``, from its ledger alone."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    entries = manifest["steps"]
    steps = _rebuild(entries, sets)
    score_removed = bool(manifest.get("config", {}).get("score_removed", True))
    filtered: Counter = Counter()
    unscored = 0
    cuts: dict[str, float] = {}
    alive_keys: set[str] | None = None
    for stage in dict.fromkeys(e["stage"] for e in entries):
        table = read_stage_parts(directory, stage_parts(manifest).get(stage, []))
        idx = [k for k, e in enumerate(entries) if e["stage"] == stage]
        if table is None:
            continue
        keys = _keys(table)
        alive = np.ones(len(keys), dtype=bool) if alive_keys is None else np.array([k in alive_keys for k in keys])
        if alive_keys is not None:
            unscored += len(alive_keys - set(keys))
        if entries[idx[0]]["kind"] == "corpus":
            reasons = np.array(table.column("reason").to_pylist(), dtype=object)
            fraction = sets.get((entries[idx[0]]["name"], "top_fraction"))
            if fraction is not None:
                reasons, cuts[entries[idx[0]]["id"]] = _recut(table, entries[idx[0]], float(fraction), alive)
            reasons[~alive] = None
        else:
            reasons, missed = _replay_stage(table, [entries[k] for k in idx], [steps[k] for k in idx], alive,
                                            score_removed)
            unscored += missed
        filtered.update(r for r in reasons[alive] if r is not None)
        alive_keys = {k for k, a, r in zip(keys, alive, reasons) if a and r is None}
    c = manifest["counts"]
    manifest["steps"] = [{**e, "cut": cuts[e["id"]]} if e["id"] in cuts else _with_sets(e, sets) for e in entries]
    funnel = attach(build_funnel(c["input"], Counter(c["rejected"]), entries, filtered), directory, manifest)
    funnel["unscored"] = unscored
    funnel["set"] = {f"{s}.{p}": v for (s, p), v in sets.items()}
    return funnel
