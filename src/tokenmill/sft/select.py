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
5. Walk the examples by score (highest first; ties by input order) and keep one unless its cluster already
   has ``per_cluster`` kept, until ``n`` are kept.

Outputs: ``DIR/selected.jsonl`` (OpenAI ``messages`` records with ``tools`` and ``meta``, which ``tokenmill
sft`` reads directly), ``DIR/selection.parquet`` (one row per input example, in input order: ``id``,
``source``, ``loc``, ``score``, ``cluster``, ``cluster_size``, ``selected``, ``reason``; an example that
never reached scoring has null score and cluster and its reason: ``rejected:<reason>`` for a record that
could not be read or normalised, ``<rule>:<reason>`` for one the quality rules dropped) and
``DIR/manifest.json`` with the report: what was kept and why the rest was not.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.curate import ngrams
from tokenmill.errors import ConfigError
from tokenmill.report.accounting import Stats
from tokenmill.sft.frames import without_frames
from tokenmill.sft.select_cli import add_parser  # noqa: F401  (the parser lives apart: see select_cli)

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

    def __post_init__(self) -> None:
        problems = []
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


def read_conversations(inputs: Sequence[str] | Any) -> tuple[list[dict], list[tuple[str, int]], Stats, list]:
    """Canonical conversations of the inputs (paths, or planned :class:`~tokenmill.job.Inputs`), their
    (source, loc), the counts, and the rejects."""
    from tokenmill.io import read_unit
    from tokenmill.job import Inputs, plan_inputs
    from tokenmill.sft.normalize import normalize_rows

    planned = inputs if isinstance(inputs, Inputs) else plan_inputs("sft", inputs, unit_bytes=1 << 40)
    schemas = planned.schemas
    convs, where, stats, rejects = [], [], Stats(), []
    for unit in planned.units:
        for raw in read_unit(unit):
            stats.input += len(raw) + len(raw.rejects)
            rejects += raw.rejects
            got, bad = normalize_rows(raw.to_rows(), raw.locs, source=raw.source, schema=schemas.get(unit.file.rel, {}))
            rejects += bad
            bad_locs = {r.loc for r in bad}
            convs += got
            where += [(raw.source, loc) for loc in raw.locs if loc not in bad_locs]
    for r in rejects:
        stats.reject(r.reason)
    return convs, where, stats, rejects


def turns(conv: dict, role: str) -> str:
    return "\n".join(m.get("content") or "" for m in conv["messages"] if m["role"] == role)


def prompts(convs: list[dict], sources: list[str]) -> list[str]:
    """The user turns clustering reads: without the template most prompts of their source share (sft/frames.py),
    so that prompts wrapped in one long template are clustered on what differs between them."""
    return without_frames([turns(c, "user") for c in convs], sources)


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
    if how.score == "quality":
        from tokenmill.curate.quality import load_model, predict_hq

        return predict_hq(load_model(how.model), responses).astype(np.float64)
    return np.log1p(np.diff(ngrams.words(responses).offsets).astype(np.float64))


def greedy(order: np.ndarray, cluster: np.ndarray, *, n: int, per_cluster: int) -> tuple[np.ndarray, np.ndarray]:
    """(selected flags, reason per example) walking ``order``: cluster caps first, then the count."""
    selected = np.zeros(len(cluster), dtype=bool)
    reason = np.full(len(cluster), None, dtype=object)
    taken: dict[int, int] = {}
    kept = 0
    for i in order:
        c = int(cluster[i])
        if kept >= n:
            reason[i] = "not_selected:below_top_n"
        elif taken.get(c, 0) >= per_cluster:
            reason[i] = "not_selected:cluster_full"
        else:
            selected[i] = True
            taken[c] = taken.get(c, 0) + 1
            kept += 1
    return selected, reason


def select(inputs: Sequence[str], *, out: str | Path, how: Selection, quality_rules: Any = None,
           overwrite: bool = False) -> dict:
    """Run the selection; write the outputs (``out`` guarded and locked by the job driver); return the manifest."""
    from tokenmill.job import hold_job, plan_inputs, resolve_out

    planned = plan_inputs("sft", inputs, unit_bytes=1 << 40)
    out, _ = resolve_out(out, [*map(str, inputs), *(f.path for f in planned.files)])
    with hold_job(out, workflow="sft select", overwrite=overwrite):
        return _select(planned, out, how, quality_rules)


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


def _select(planned: Any, out: Path, how: Selection, quality_rules: Any) -> dict:
    from tokenmill.base.files import atomic_write
    from tokenmill.curate.sft_quality import SftQuality

    convs, where, stats, rejects = read_conversations(planned)
    rules = quality_rules if quality_rules is not None else SftQuality(check_language=False)
    if convs:
        rules.setup()
        batch = pa.record_batch({"prompt": pa.array([turns(c, "user") for c in convs], type=pa.large_string()),
                                 "response": pa.array([turns(c, "assistant") for c in convs], type=pa.large_string())})
        failed = rules.decide(rules.score(batch).scores)
    else:
        failed = np.zeros(0, dtype=object)
    ok = np.array([f is None for f in failed], dtype=bool)
    for f in failed[~ok]:
        stats.filter(f"{rules.name}_v{rules.version}:{f}")
    idx = np.nonzero(ok)[0]
    pool = [convs[i] for i in idx]
    s = scores(pool, how) if pool else np.zeros(0)
    cl = clusters(minhash(prompts(pool, [where[i][0] for i in idx]), hashes=how.hashes, seed=how.seed),
                  bands=how.bands) if pool else np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(len(pool)), -s))
    selected, reason = greedy(order, cl, n=how.n, per_cluster=how.per_cluster)
    for r in reason[~selected]:
        stats.filter(r)
    stats.kept = int(selected.sum())
    _write(out, pool, [where[i] for i in idx], s, cl, selected)
    dropped = [(convs[i]["id"], *where[i], f"{rules.name}_v{rules.version}:{failed[i]}") for i in np.nonzero(~ok)[0]]
    dropped += [(None, r.source, r.loc, f"rejected:{r.reason}") for r in rejects]
    _write_ledger(out, pool, [where[i] for i in idx], s, cl, selected, reason, dropped)
    sizes = np.bincount(cl) if len(cl) else np.zeros(0, dtype=np.int64)
    report = {"scored": len(pool), "clusters": int(len(np.unique(cl))) if len(cl) else 0,
              "largest_cluster": int(sizes.max()) if len(sizes) else 0,
              "score": {"all_mean": _mean(s), "selected_mean": _mean(s[selected]),
                        "selected_min": float(s[selected].min()) if selected.any() else None},
              "settings": how.__dict__}
    if shortfall(how, stats):
        report["warning"] = shortfall(how, stats)
    manifest = {"kind": "sft select", "counts": stats.to_dict(), "identity": stats.identity_line(),
                "report": report, "outputs": ["selected.jsonl", "selection.parquet"],
                "rejects": len(rejects)}
    if rejects:
        with open(out / "rejects.jsonl", "wb") as fh:
            for r in rejects:
                fh.write(r.to_json() + b"\n")
    atomic_write(out / "manifest.json", json.dumps(manifest, indent=2, default=str).encode() + b"\n")
    return manifest


def _mean(x: np.ndarray) -> float | None:
    return round(float(x.mean()), 4) if len(x) else None


def _write(out: Path, pool, where, s, cl, selected) -> None:
    with open(out / "selected.jsonl", "w", encoding="utf-8") as fh:
        for i in np.nonzero(selected)[0]:
            c = pool[i]
            rec = {"id": c["id"], "messages": [_message(m) for m in c["messages"]]}
            if c.get("tools"):
                rec["tools"] = json.loads(c["tools"])
            rec["meta"] = {"selection_score": round(float(s[i]), 6), "cluster": int(cl[i]),
                           "source": where[i][0], "loc": where[i][1]}
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


LEDGER = pa.schema([("id", pa.string()), ("source", pa.string()), ("loc", pa.int64()), ("score", pa.float64()),
                    ("cluster", pa.int64()), ("cluster_size", pa.int64()), ("selected", pa.bool_()),
                    ("reason", pa.string())])


def _write_ledger(out: Path, pool, where, s, cl, selected, reason, dropped: list[tuple]) -> None:
    """``selection.parquet``: every input example once, in input order (source, then line or row)."""
    sizes = np.bincount(cl) if len(cl) else np.zeros(0, dtype=np.int64)
    rows = [{"id": c["id"], "source": w[0], "loc": w[1], "score": float(s[i]), "cluster": int(cl[i]),
             "cluster_size": int(sizes[cl[i]]), "selected": bool(selected[i]), "reason": reason[i]}
            for i, (c, w) in enumerate(zip(pool, where))]
    rows += [{"id": rec_id, "source": src, "loc": loc, "score": None, "cluster": None, "cluster_size": None,
              "selected": False, "reason": why} for rec_id, src, loc, why in dropped]
    rows.sort(key=lambda r: (r["source"], r["loc"]))
    pq.write_table(pa.Table.from_pylist(rows, schema=LEDGER), out / "selection.parquet")


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


def cmd_select(args: Any) -> int:
    from tokenmill.curate.sft_quality import SftQuality

    how = Selection(n=args.n, per_cluster=args.per_cluster, score=args.score, model=args.model)
    m = select(args.inputs, out=args.out, how=how, quality_rules=SftQuality(check_language=args.check_language),
               overwrite=args.overwrite)
    r = m["report"]
    print(f"sft select: {m['counts']['kept']:,} kept of {m['counts']['input']:,} records "
          f"({r['scored']:,} scored in {r['clusters']:,} prompt clusters, largest {r['largest_cluster']}) -> {args.out}")
    print(m["identity"])
    if r.get("warning"):
        print(f"warning: {r['warning']}", file=sys.stderr)
    print(f"selected: {Path(args.out) / 'selected.jsonl'}\nmanifest: {Path(args.out) / 'manifest.json'}")
    return 0
