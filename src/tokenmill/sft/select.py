"""``tokenmill sft select``: keep the best N examples by a score, at most k per cluster of near-identical
prompts (LIMA-style: few, good, diverse).

1. Read and normalise conversations like ``tokenmill sft`` (rejects with file, line and reason).
2. Drop examples that fail the ``sft_quality`` rules (empty or placeholder answers, refusals, answers cut
   mid-sentence, repeated n-grams, language mismatch), counted by rule.
3. Score every example: ``length`` (words in the assistant turns, log-scaled), or ``quality`` (the
   quality classifier's probability for the assistant turns; ``--model``).
4. Cluster prompts: MinHash over word bigrams of the user turns (``hashes`` values, ``bands`` bands),
   without the template many prompts of their source share (:mod:`tokenmill.sft.frames`), examples sharing a
   band bucket joined by union-find. Held in memory: selection sets are small
   (thousands to a few million examples, 8 bytes x ``hashes`` each).
5. Label every prompt an academic/templated task or a user request (:mod:`tokenmill.sft.taskmix`: a score and
   the cues that fired).
6. Walk the examples by score (highest first; ties by input order) and keep one unless its cluster already
   has ``per_cluster`` kept, until ``n`` are kept. With ``mix`` (``--mix academic=0.3,user=0.7``) each label
   has its quota of the ``n`` and keeps no more; a label short of its quota is not made up from the others
   (the mix holds) and the manifest's ``warning`` gives the counts.

Outputs: ``DIR/selected.jsonl`` (OpenAI ``messages`` records with ``tools`` and ``meta``, which ``tokenmill
sft`` reads directly), ``DIR/selection.parquet`` (one row per input example, in input order: ``id``,
``source``, ``loc``, ``score``, ``cluster``, ``cluster_size``, ``selected``, ``reason``, ``task.label``,
``task.score``, ``task.cues``; an example that never reached scoring has null score, cluster and task and its
reason: ``rejected:<reason>`` for a record that
could not be read or normalised, ``<rule>:<reason>`` for one the quality rules dropped) and
``DIR/manifest.json`` with the report: what was kept and why the rest was not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.curate import ngrams
from tokenmill.curate.quality.classifier import load_model, predict_hq
from tokenmill.curate.quality.sft import SftQuality
from tokenmill.engine.stage import Stage, StageContext, StagePlan, Unit, UnitResult
from tokenmill.errors import ConfigError
from tokenmill.io import read_unit
from tokenmill.job.options import JobOptions
from tokenmill.job.run import Job, Results, Run
from tokenmill.job.run import run as run_job
from tokenmill.report.accounting import Stats
from tokenmill.report.rejects import RejectSink
from tokenmill.sft.frames import without_frames
from tokenmill.sft.normalize import normalize_rows
from tokenmill.sft.taskmix import LABELS, RULE, THRESHOLD, TaskLabels, check_mix, label_prompts, mix_shortfall, quotas
from tokenmill.track import staged_files

_MERSENNE = np.uint64((1 << 61) - 1)


@dataclass(frozen=True)
class Selection:
    n: int
    per_cluster: int = 1
    score: str = "length"
    model: str | None = None
    hashes: int = 32
    bands: int = 8
    seed: int = 0
    mix: dict[str, float] | None = None  # each task label's share of n (tokenmill.sft.taskmix)

    def __post_init__(self) -> None:
        problems = []
        if self.mix is not None:
            try:
                check_mix(self.mix)
            except ValueError as exc:
                problems.append(f"mix {self.mix}: {exc}")
        if self.n < 1:
            problems.append(f"--n {self.n}: expected at least 1")
        if self.per_cluster < 1:
            problems.append(f"--per-cluster {self.per_cluster}: expected at least 1")
        if self.score not in ("length", "quality"):
            problems.append(f"--score {self.score!r}: expected length or quality")
        if self.score == "quality" and not self.model:
            problems.append("--score quality needs --model (a model written by `tokenmill quality train`)")
        if self.hashes % self.bands:
            problems.append(f"hashes ({self.hashes}) must be a multiple of bands ({self.bands})")
        if problems:
            raise ConfigError(problems)


def turns(conv: dict, role: str) -> str:
    return "\n".join(m.get("content") or "" for m in conv["messages"] if m["role"] == role)


def prompts(users: list[str], sources: list[str]) -> list[str]:
    """The user turns clustering reads: without the template most prompts of their source share (sft/frames.py),
    so that prompts wrapped in one long template are clustered on what differs between them (and the task
    labels read which prompts carry one)."""
    return without_frames(users, sources)


def minhash(texts: list[str], *, hashes: int, seed: int) -> np.ndarray:
    """``(len(texts), hashes)`` MinHash signatures over word bigrams (a one-word text: its word)."""
    w = ngrams.words(texts)
    h, doc = ngrams.ngram_hashes(w, 2)
    whole, lengths = ngrams.whole_hashes(w)
    short = np.nonzero(lengths < 2)[0]
    h, doc = np.concatenate([h, whole[short]]), np.concatenate([doc, short])
    order = np.argsort(doc, kind="stable")
    h, doc = h[order] % _MERSENNE, doc[order]
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 1 << 61, size=hashes, dtype=np.uint64)
    b = rng.integers(0, 1 << 61, size=hashes, dtype=np.uint64)
    sig = np.full((len(texts), hashes), np.iinfo(np.uint64).max, dtype=np.uint64)
    if not len(h):
        return sig
    starts = np.nonzero(np.r_[True, doc[1:] != doc[:-1]])[0]
    docs = doc[starts]
    with np.errstate(over="ignore"):
        for i in range(hashes):
            perm = (a[i] * h + b[i]) % _MERSENNE
            sig[docs, i] = np.minimum.reduceat(perm, starts)
    return sig


def clusters(sig: np.ndarray, *, bands: int) -> np.ndarray:
    """Cluster id of each row (the smallest row index in it): rows sharing any band bucket are joined."""
    n = len(sig)
    parent = np.arange(n)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    rows = sig.shape[1] // bands
    for band in range(bands):
        keys = [sig[i, band * rows:(band + 1) * rows].tobytes() for i in range(n)]
        first: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            j = first.setdefault(k, i)
            if j != i:
                a, b = find(i), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return np.array([find(i) for i in range(n)])


def scores(convs: list[dict], how: Selection) -> np.ndarray:
    responses = [turns(c, "assistant") for c in convs]
    if how.score == "quality" and how.model:  # Selection refuses the quality score without a model

        return predict_hq(load_model(how.model), responses).astype(np.float64)
    return np.log1p(np.diff(ngrams.words(responses).offsets).astype(np.float64))


def greedy(order: np.ndarray, cluster: np.ndarray, *, n: int, per_cluster: int, labels: list[str] | None = None,
           quota: dict[str, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(selected flags, reason per example) walking ``order``: the count, then the label's quota (``quota``:
    examples per label of ``labels``, when a mix is asked), then the cluster cap."""
    selected = np.zeros(len(cluster), dtype=bool)
    reason = np.full(len(cluster), None, dtype=object)
    taken: dict[int, int] = {}
    per_label: dict[str, int] = {}
    kept = 0
    for i in order:
        c = int(cluster[i])
        label = labels[i] if quota and labels is not None else ""
        if kept >= n:
            reason[i] = "not_selected:below_top_n"
        elif quota and per_label.get(label, 0) >= quota.get(label, 0):
            reason[i] = "not_selected:mix_quota_full"
        elif taken.get(c, 0) >= per_cluster:
            reason[i] = "not_selected:cluster_full"
        else:
            selected[i] = True
            taken[c] = taken.get(c, 0) + 1
            per_label[label] = per_label.get(label, 0) + 1
            kept += 1
    return selected, reason


def select(inputs: Sequence[str], *, out: str | Path, how: Selection, quality_rules: Any = None,
           overwrite: bool = False, options: JobOptions | None = None) -> dict:
    """Run the selection; write the outputs; return the manifest. The run is :func:`tokenmill.job.run` of
    :func:`select_job` (``options``: the job options; ``overwrite`` kept for callers that pass only that)."""
    options = options or JobOptions(overwrite=overwrite)
    return run_job(select_job(how, quality_rules=quality_rules), inputs, out=out, options=options, tokenizer=None)


def shortfall(how: Selection, stats: Stats) -> str:
    """Why fewer than ``how.n`` examples were kept ("" when ``n`` were): the counts that took the others, largest
    first, so that a selection of 0 of 5 never passes unsaid."""
    if stats.kept >= how.n:
        return ""
    why = sorted({**stats.filtered, **stats.rejected}.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{count:,} {reason}" for reason, count in why[:3]]
    if any(reason == "not_selected:cluster_full" for reason, _ in why[:3]):
        parts.append(f"(a prompt cluster keeps at most --per-cluster {how.per_cluster}: raise it to keep more of one)")
    asked = f"kept {stats.kept:,} of the {how.n:,} examples asked for (--n {how.n})"
    if not parts:
        return f"{asked}: the inputs hold only {stats.input:,} records"
    return f"{asked}: of {stats.input:,} records, {', '.join(parts)}; selection.parquet gives each record's reason"


def select_job(how: Selection, *, quality_rules: Any = None) -> Job:
    """The ``sft select`` job: a ``select_score`` stage over the input units (read, normalise, the quality rules,
    the score, each unit's part under ``_work/``), then one ``select`` unit over every part (cluster the
    prompts, walk by score), which writes ``selected.jsonl`` and ``selection.parquet``."""

    rules = quality_rules if quality_rules is not None else SftQuality(check_language=False)

    def configure(run: Run) -> ScoreTask:
        run.config["select"] = {**how.__dict__, "rules": f"{rules.name}_v{rules.version}"}
        return ScoreTask(how, rules, run.inputs.schemas, limit=run.options.limit)

    def stages(run: Run) -> list[Stage]:
        def pick(ctx: StageContext) -> StagePlan:
            parts = [r.data["part"] for r in ctx.results[SCORE_STAGE]]
            return StagePlan([Unit(0, "select", 0, payload=tuple(parts))], PickTask(how, str(run.out)),
                             drop=(f"_work/{SCORE_STAGE}",))

        first = Stage(SCORE_STAGE, 1, lambda ctx: StagePlan(run.input_units(), run.guarded(run.plan)))
        return [first, Stage(PICK_STAGE, 1, pick)]

    def counts(run: Run, results: Results) -> Stats:
        acc = Stats()
        for r in [*results[SCORE_STAGE], *results[PICK_STAGE]]:
            acc = acc + r.stats
        return acc

    def report(run: Run, results: Results, manifest: dict) -> dict:
        section = {**results[PICK_STAGE][0].data["report"], "settings": how.__dict__}
        short = [shortfall(how, counts(run, results)), mix_shortfall(section["task_mix"])]
        if any(short):  # a selection of fewer than --n (or short of its mix) never passes unsaid
            section["warning"] = "; ".join(w for w in short if w)
        return {"report": section, "outputs": [SELECTED, LEDGER_FILE]}

    return Job("sft select", "sft", stages, report, configure=configure, counts=counts,
               pack=False)  # its scores know a record by its line within the unit


SCORE_STAGE, PICK_STAGE = "select_score", "select"
SELECTED, LEDGER_FILE = "selected.jsonl", "selection.parquet"
PART = pa.schema([("id", pa.string()), ("source", pa.string()), ("loc", pa.int64()), ("score", pa.float64()),
                  ("conversation", pa.large_string()), ("reason", pa.string())])


@dataclass(frozen=True)
class ScoreTask:
    """One input unit: its conversations read and normalised (rejects to the unit's rejects file), the quality
    rules applied, the survivors scored; every record of the unit written to one part, in input order."""

    how: Selection
    rules: Any
    schemas: dict[str, dict]
    limit: int | None = None  # first records of every input only (a trial run)

    def setup(self) -> None:
        self.rules.setup()

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        work = unit.payload
        stats, sink, convs, where = Stats(), RejectSink(staging, work), [], []
        rows: list[dict] = []
        for raw in read_unit(work, limit=self.limit):
            stats.input += len(raw) + len(raw.rejects)
            got, bad = normalize_rows(raw.to_rows(), raw.locs, source=raw.source,
                                      schema=self.schemas.get(raw.source, {}))
            for r in [*raw.rejects, *bad]:
                rows.append({"id": None, "source": r.source, "loc": r.loc, "reason": f"rejected:{r.reason}"})
            sink.add(raw.rejects, stats)
            sink.add(bad, stats)
            bad_locs = {r.loc for r in bad}
            convs += got
            where += [(raw.source, loc) for loc in raw.locs if loc not in bad_locs]
        failed = self._failed(convs)
        pool = [i for i, f in enumerate(failed) if f is None]
        s = scores([convs[i] for i in pool], self.how) if pool else np.zeros(0)
        for k, i in enumerate(pool):
            rows.append({"id": convs[i]["id"], "source": where[i][0], "loc": where[i][1], "score": float(s[k]),
                         "conversation": json.dumps(convs[i], ensure_ascii=False)})
        for i, f in enumerate(failed):
            if f is not None:
                stats.filter(f"{self.rules.name}_v{self.rules.version}:{f}")
                rows.append({"id": convs[i]["id"], "source": where[i][0], "loc": where[i][1],
                             "reason": f"{self.rules.name}_v{self.rules.version}:{f}"})
        rel = f"_work/{SCORE_STAGE}/{unit.name}.parquet"
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=PART), staging / rel)
        sink.close()
        return UnitResult(stats=stats, outputs=staged_files(staging), data={"part": rel})

    def _failed(self, convs: list[dict]) -> np.ndarray:
        """Each conversation's quality-rule failure (None: passed)."""
        if not convs:
            return np.zeros(0, dtype=object)
        batch = pa.record_batch({"prompt": pa.array([turns(c, "user") for c in convs], type=pa.large_string()),
                                 "response": pa.array([turns(c, "assistant") for c in convs], type=pa.large_string())})
        return self.rules.decide(self.rules.score(batch).scores)


@dataclass(frozen=True)
class PickTask:
    """The one unit of the ``select`` stage: every scored example (the parts in input order), its prompt cluster,
    the walk by score; writes ``selected.jsonl`` and ``selection.parquet``."""

    how: Selection
    out: str

    def __call__(self, unit: Unit, staging: Path) -> UnitResult:
        table = pa.concat_tables([pq.read_table(Path(self.out) / rel, schema=PART) for rel in unit.payload])
        scored = table.filter(pc.is_null(table.column("reason")))
        pool = [json.loads(c) for c in scored.column("conversation").to_pylist()]
        where = list(zip(scored.column("source").to_pylist(), scored.column("loc").to_pylist()))
        s = np.asarray(scored.column("score").to_numpy(zero_copy_only=False), dtype=np.float64)
        how = self.how
        users, sources = [turns(c, "user") for c in pool], [w[0] for w in where]
        cores = prompts(users, sources)
        task = label_prompts(users, sources, cores=cores)
        cl = clusters(minhash(cores, hashes=how.hashes, seed=how.seed),
                      bands=how.bands) if pool else np.zeros(0, dtype=np.int64)
        order = np.lexsort((np.arange(len(pool)), -s))
        quota = quotas(how.n, how.mix) if how.mix else None
        selected, reason = greedy(order, cl, n=how.n, per_cluster=how.per_cluster, labels=task.labels, quota=quota)
        stats = Stats()
        for r in reason[~selected]:
            stats.filter(r)
        stats.kept = int(selected.sum())
        _write(staging, pool, where, s, cl, selected, task)
        dropped = table.filter(pc.invert(pc.is_null(table.column("reason"))))
        dropped_rows = list(zip(dropped.column("id").to_pylist(), dropped.column("source").to_pylist(),
                                dropped.column("loc").to_pylist(), dropped.column("reason").to_pylist()))
        _write_ledger(staging, pool, where, s, cl, selected, reason, dropped_rows, task)
        sizes = np.bincount(cl) if len(cl) else np.zeros(0, dtype=np.int64)
        report = {"scored": len(pool), "clusters": int(len(np.unique(cl))) if len(cl) else 0,
                  "largest_cluster": int(sizes.max()) if len(sizes) else 0,
                  "score": {"all_mean": _mean(s), "selected_mean": _mean(s[selected]),
                            "selected_min": float(s[selected].min()) if selected.any() else None},
                  "task_mix": task_mix_report(task, selected, reason, how.mix, quota)}
        return UnitResult(stats=stats, outputs=[SELECTED, LEDGER_FILE], data={"report": report})


def task_mix_report(task: TaskLabels, selected: np.ndarray, reason: np.ndarray, mix: dict | None,
                    quota: dict | None) -> dict:
    """The mix of the scored and of the selected examples by task label, what ``--mix`` asked (its shares and
    each label's quota) and, per label, how many the prompt-cluster limit left out."""
    def per_label(rows) -> dict[str, int]:
        return {label: sum(task.labels[i] == label for i in rows) for label in LABELS}

    return {"rule": RULE, "threshold": THRESHOLD, "scored": task.counts(),
            "selected": per_label(np.nonzero(selected)[0]),
            "cluster_full": per_label(np.nonzero(reason == "not_selected:cluster_full")[0]),
            "mix": mix, "asked": quota,
            "mix_flag": ",".join(f"{k}={v:g}" for k, v in mix.items()) if mix else None}


def _mean(x: np.ndarray) -> float | None:
    return round(float(x.mean()), 4) if len(x) else None


def _write(out: Path, pool, where, s, cl, selected, task: TaskLabels) -> None:
    with open(out / SELECTED, "w", encoding="utf-8") as fh:
        for i in np.nonzero(selected)[0]:
            c = pool[i]
            rec = {"id": c["id"], "messages": [_message(m) for m in c["messages"]]}
            if c.get("tools"):
                rec["tools"] = json.loads(c["tools"])
            rec["meta"] = {"selection_score": round(float(s[i]), 6), "cluster": int(cl[i]),
                           "source": where[i][0], "loc": where[i][1], "task": task.labels[i],
                           "task_score": float(task.scores[i])}
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


LEDGER = pa.schema([("id", pa.string()), ("source", pa.string()), ("loc", pa.int64()), ("score", pa.float64()),
                    ("cluster", pa.int64()), ("cluster_size", pa.int64()), ("selected", pa.bool_()),
                    ("reason", pa.string()), ("task.label", pa.string()), ("task.score", pa.float64()),
                    ("task.cues", pa.list_(pa.string()))])


def _write_ledger(out: Path, pool, where, s, cl, selected, reason, dropped: list[tuple], task: TaskLabels) -> None:
    """``selection.parquet``: every input example once, in input order (source, then line or row)."""
    sizes = np.bincount(cl) if len(cl) else np.zeros(0, dtype=np.int64)
    rows = [{"id": c["id"], "source": w[0], "loc": w[1], "score": float(s[i]), "cluster": int(cl[i]),
             "cluster_size": int(sizes[cl[i]]), "selected": bool(selected[i]), "reason": reason[i],
             "task.label": task.labels[i], "task.score": float(task.scores[i]), "task.cues": task.cues[i]}
            for i, (c, w) in enumerate(zip(pool, where))]
    rows += [{"id": rec_id, "source": src, "loc": loc, "score": None, "cluster": None, "cluster_size": None,
              "selected": False, "reason": why} for rec_id, src, loc, why in dropped]
    rows.sort(key=lambda r: (r["source"], r["loc"]))
    pq.write_table(pa.Table.from_pylist(rows, schema=LEDGER), out / LEDGER_FILE)


def _message(m: dict) -> dict:
    out = {"role": m["role"], "content": m.get("content") or ""}
    if m.get("reasoning"):
        out["reasoning_content"] = m["reasoning"]
    if m.get("tool_calls"):
        out["tool_calls"] = [{"id": t.get("id"), "type": "function",
                              "function": {"name": t["name"], "arguments": t.get("arguments") or "{}"}}
                             for t in m["tool_calls"]]
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    if m.get("name"):
        out["name"] = m["name"]
    return out
